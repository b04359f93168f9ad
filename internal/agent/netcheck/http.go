package netcheck

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// Bounds of an HTTP check.
const (
	maxBody      = 1 << 20
	maxRedirects = 10
	// defaultCertWarningDays is how close to its expiry an https certificate makes the check
	// degraded when the monitor does not say.
	defaultCertWarningDays = 14
)

func httpCheck(ctx context.Context, c agentproto.MonitorCheck) agentproto.MonitorCheckResult {
	cfg := c.Config
	method := cfg.Method
	if method == "" {
		method = http.MethodGet
	}
	verify := cfg.VerifyTLS == nil || *cfg.VerifyTLS
	follow := cfg.FollowRedirects == nil || *cfg.FollowRedirects
	// No proxy: the check is of the target as this machine reaches it directly. Without
	// verifyTls the monitor asks for no certificate check.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: !verify}, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if !follow {
			return http.ErrUseLastResponse
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, method, c.Target, nil)
	if err != nil {
		return failed("request: %v", err)
	}
	for k, v := range cfg.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return failed("%s %s: %v", method, c.Target, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	took := time.Since(start)
	if err != nil {
		return failed("read the answer: %v", err)
	}
	details := map[string]any{"statusCode": resp.StatusCode}
	if resp.Request != nil && resp.Request.URL.String() != c.Target {
		details["finalUrl"] = resp.Request.URL.String()
	}
	r := agentproto.MonitorCheckResult{Status: agentproto.MonitorOnline, ResponseMs: ms(took), Details: details}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		cert := resp.TLS.PeerCertificates[0]
		left := time.Until(cert.NotAfter).Hours() / 24
		details["certDaysLeft"] = math.Floor(left)
		details["certExpiresAt"] = cert.NotAfter.UTC()
		warn := defaultCertWarningDays
		if cfg.CertExpiryWarningDays != nil {
			warn = *cfg.CertExpiryWarningDays
		}
		switch {
		case left < 0:
			r.Status, r.Error = agentproto.MonitorOffline, "the certificate expired on "+cert.NotAfter.UTC().Format(time.RFC3339)
		case warn > 0 && left < float64(warn):
			r.Status, r.Error = agentproto.MonitorDegraded, fmt.Sprintf("the certificate expires in %.0f days", math.Floor(left))
		}
	}
	if ok := statusOK(resp.StatusCode, cfg.ExpectedStatus); !ok {
		r.Status, r.Error = agentproto.MonitorOffline, fmt.Sprintf("status %d is not an expected status", resp.StatusCode)
	} else if cfg.ExpectedBody != "" && !strings.Contains(string(body), cfg.ExpectedBody) {
		r.Status, r.Error = agentproto.MonitorOffline, "the body does not contain the expected text"
	}
	return r
}

func statusOK(code int, want []int) bool {
	if len(want) == 0 {
		return code < 400
	}
	return slices.Contains(want, code)
}

// unwrapURLError drops the method and address url.Error repeats.
func unwrapURLError(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}
