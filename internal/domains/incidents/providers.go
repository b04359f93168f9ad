package incidents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Provider API bounds.
const (
	// pageSize is the findings asked for per page.
	pageSize = 100
	// maxPages bounds the pages of one poll; the rest waits for the next (the position moved).
	maxPages = 50
	// maxResponseBytes bounds one page's body.
	maxResponseBytes = 8 << 20
	// maxFieldLen bounds stored text taken from a provider.
	maxFieldLen = 500
)

// pollConfig is what a poll of a connector needs.
type pollConfig struct {
	id, partnerID, orgID, provider, baseURL, apiKey, position string
	interval, failures                                        int
}

// finding is one finding as a provider reported it, mapped to Gale's terms.
type finding struct {
	sourceID, hostname, mac, title, edrStatus, linkOut string
	severity                                           int
	detectedAt, changedAt                              time.Time
}

// fetchResult is a poll's findings and the provider position to resume from.
type fetchResult struct {
	findings  []finding
	position  string
	malformed int
}

// provider speaks one EDR provider's API.
type provider interface {
	// fetch reads the findings new or changed since the position.
	fetch(ctx context.Context, client *http.Client, cfg pollConfig) (fetchResult, error)
	// test reads one page and returns how many findings it held.
	test(ctx context.Context, client *http.Client, cfg pollConfig) (int, error)
}

func (s *Service) providerOf(name string) provider {
	if name == ProviderB {
		return providerB{}
	}
	return providerA{}
}

// call runs one request and decodes its JSON answer into out.
func call(ctx context.Context, client *http.Client, req *http.Request, out any) error {
	req = req.WithContext(ctx)
	req.Header.Set("Accept", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("the provider could not be reached: %s", scrub(err.Error()))
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("reading the provider's answer failed: %s", scrub(err.Error()))
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("the provider answered HTTP %d: %s", res.StatusCode, clip(strings.TrimSpace(string(body)), 200))
	}
	if len(body) > maxResponseBytes {
		return fmt.Errorf("the provider's answer exceeds %d bytes", maxResponseBytes)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("the provider's answer is not the expected JSON: %s", clip(err.Error(), 200))
	}
	return nil
}

// scrub removes the query (which may hold a cursor) from a transport error's URL.
func scrub(msg string) string {
	if i := strings.Index(msg, "?"); i >= 0 {
		if j := strings.IndexAny(msg[i:], "\": "); j > 0 {
			return msg[:i] + msg[i+j:]
		}
		return msg[:i]
	}
	return msg
}

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) > n {
		return truncate(s, n) + "…"
	}
	return s
}

// text bounds a provider's string for storage (valid UTF-8, no NUL, at most maxFieldLen bytes).
func text(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, ""), "\x00", "")
	return truncate(strings.TrimSpace(s), maxFieldLen)
}

// consoleLink keeps an http(s) link, else none.
func consoleLink(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(s) > 2048 {
		return ""
	}
	return u.String()
}

// providerA is edr_a: GET {base}/api/v1/detections?since=&cursor=&limit= with a bearer
// token; detections {id, hostname, title, severity critical|high|medium|low|informational,
// status, detected_at, updated_at, console_url} and next_cursor.
type providerA struct{}

// severitiesA maps edr_a's severities to ranks.
var severitiesA = map[string]int{"critical": 1, "high": 2, "medium": 3, "low": 4, "informational": 4}

type pageA struct {
	Detections []json.RawMessage `json:"detections"`
	NextCursor string            `json:"next_cursor"`
}

type detectionA struct {
	ID         string `json:"id"`
	Hostname   string `json:"hostname"`
	Title      string `json:"title"`
	Severity   string `json:"severity"`
	Status     string `json:"status"`
	DetectedAt string `json:"detected_at"`
	UpdatedAt  string `json:"updated_at"`
	ConsoleURL string `json:"console_url"`
}

func (providerA) page(ctx context.Context, client *http.Client, cfg pollConfig, since, cursor string, limit int) (pageA, error) {
	q := url.Values{}
	if since != "" {
		q.Set("since", since)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	q.Set("limit", fmt.Sprint(limit))
	req, err := http.NewRequest(http.MethodGet, cfg.baseURL+"/api/v1/detections?"+q.Encode(), nil)
	if err != nil {
		return pageA{}, fmt.Errorf("bad provider URL: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+cfg.apiKey)
	var p pageA
	return p, call(ctx, client, req, &p)
}

func (a providerA) test(ctx context.Context, client *http.Client, cfg pollConfig) (int, error) {
	p, err := a.page(ctx, client, cfg, "", "", 1)
	return len(p.Detections), err
}

func (a providerA) fetch(ctx context.Context, client *http.Client, cfg pollConfig) (fetchResult, error) {
	out := fetchResult{position: cfg.position}
	newest, _ := time.Parse(time.RFC3339Nano, cfg.position)
	cursor := ""
	for range maxPages {
		p, err := a.page(ctx, client, cfg, cfg.position, cursor, pageSize)
		if err != nil {
			return out, err
		}
		for _, raw := range p.Detections {
			var d detectionA
			if json.Unmarshal(raw, &d) != nil {
				out.malformed++
				continue
			}
			rank, ok := severitiesA[strings.ToLower(d.Severity)]
			detected, err := time.Parse(time.RFC3339Nano, d.DetectedAt)
			id := text(d.ID)
			if !ok || err != nil || id == "" {
				out.malformed++
				continue
			}
			changed, err := time.Parse(time.RFC3339Nano, d.UpdatedAt)
			if err != nil {
				changed = detected
			}
			out.findings = append(out.findings, finding{sourceID: id, hostname: text(d.Hostname), title: text(d.Title),
				edrStatus: text(d.Status), linkOut: consoleLink(d.ConsoleURL), severity: rank, detectedAt: detected, changedAt: changed})
			if changed.After(newest) {
				newest = changed
			}
		}
		if p.NextCursor == "" || len(p.Detections) == 0 {
			break
		}
		cursor = p.NextCursor
	}
	if !newest.IsZero() {
		out.position = newest.UTC().Format(time.RFC3339Nano)
	}
	return out, nil
}

// providerB is edr_b: POST {base}/alerts/search with header X-Api-Key and body
// {modifiedAfter, offset, limit}; alerts {alertId, deviceName, macAddress, name, severity
// 1..10, state, createdTime, modifiedTime, consoleLink} and total.
type providerB struct{}

// severityB maps edr_b's 1..10 to ranks: 9-10 p1, 7-8 p2, 4-6 p3, 1-3 p4.
func severityB(n int) (int, bool) {
	switch {
	case n >= 9 && n <= 10:
		return 1, true
	case n >= 7 && n <= 8:
		return 2, true
	case n >= 4 && n <= 6:
		return 3, true
	case n >= 1 && n <= 3:
		return 4, true
	}
	return 0, false
}

type pageB struct {
	Total  int               `json:"total"`
	Alerts []json.RawMessage `json:"alerts"`
}

type alertB struct {
	AlertID      string  `json:"alertId"`
	DeviceName   string  `json:"deviceName"`
	MACAddress   string  `json:"macAddress"`
	Name         string  `json:"name"`
	Severity     float64 `json:"severity"`
	State        string  `json:"state"`
	CreatedTime  string  `json:"createdTime"`
	ModifiedTime string  `json:"modifiedTime"`
	ConsoleLink  string  `json:"consoleLink"`
}

func (providerB) page(ctx context.Context, client *http.Client, cfg pollConfig, after string, offset, limit int) (pageB, error) {
	body := map[string]any{"offset": offset, "limit": limit}
	if after != "" {
		body["modifiedAfter"] = after
	}
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, cfg.baseURL+"/alerts/search", bytes.NewReader(raw))
	if err != nil {
		return pageB{}, fmt.Errorf("bad provider URL: %w", err)
	}
	req.Header.Set("X-Api-Key", cfg.apiKey)
	req.Header.Set("Content-Type", "application/json")
	var p pageB
	return p, call(ctx, client, req, &p)
}

func (b providerB) test(ctx context.Context, client *http.Client, cfg pollConfig) (int, error) {
	p, err := b.page(ctx, client, cfg, "", 0, 1)
	return len(p.Alerts), err
}

func (b providerB) fetch(ctx context.Context, client *http.Client, cfg pollConfig) (fetchResult, error) {
	out := fetchResult{position: cfg.position}
	newest, _ := time.Parse(time.RFC3339Nano, cfg.position)
	offset := 0
	for range maxPages {
		p, err := b.page(ctx, client, cfg, cfg.position, offset, pageSize)
		if err != nil {
			return out, err
		}
		for _, raw := range p.Alerts {
			var x alertB
			if json.Unmarshal(raw, &x) != nil {
				out.malformed++
				continue
			}
			rank, ok := severityB(int(x.Severity))
			created, err := time.Parse(time.RFC3339Nano, x.CreatedTime)
			id := text(x.AlertID)
			if !ok || float64(int(x.Severity)) != x.Severity || err != nil || id == "" {
				out.malformed++
				continue
			}
			changed, err := time.Parse(time.RFC3339Nano, x.ModifiedTime)
			if err != nil {
				changed = created
			}
			out.findings = append(out.findings, finding{sourceID: id, hostname: text(x.DeviceName), mac: normalizeMAC(x.MACAddress),
				title: text(x.Name), edrStatus: text(x.State), linkOut: consoleLink(x.ConsoleLink), severity: rank, detectedAt: created,
				changedAt: changed})
			if changed.After(newest) {
				newest = changed
			}
		}
		offset += len(p.Alerts)
		if len(p.Alerts) == 0 || offset >= p.Total {
			break
		}
	}
	if !newest.IsZero() {
		out.position = newest.UTC().Format(time.RFC3339Nano)
	}
	return out, nil
}

// normalizeMAC writes a MAC address lower-case with colons (as devices store it); "" when it
// is not one.
func normalizeMAC(s string) string {
	s = strings.ToLower(strings.NewReplacer("-", ":", ".", "").Replace(strings.TrimSpace(s)))
	if len(s) == 12 && !strings.Contains(s, ":") {
		var b strings.Builder
		for i := 0; i < 12; i += 2 {
			if i > 0 {
				b.WriteByte(':')
			}
			b.WriteString(s[i : i+2])
		}
		s = b.String()
	}
	if len(s) != 17 {
		return ""
	}
	return s
}
