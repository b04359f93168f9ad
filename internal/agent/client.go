package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// apiError is an error answer of the server, in its envelope.
type apiError struct {
	Status  int
	Code    string
	Message string
	// DeviceID is the deviceId detail of the answer, which names the device a
	// DEVICE_DECOMMISSIONED answer is about.
	DeviceID string
}

// decommissions reports whether err is the server's word that this device was decommissioned:
// the code, and the device's own ID, which only the server knows goes with the agent's token.
func decommissions(err error, deviceID string) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == agentproto.ErrDeviceDecommissioned && ae.DeviceID == deviceID && deviceID != ""
}

// refused reports whether err is an authentication refusal (401 or 403): the token was
// rotated, a proxy answers in the server's place, or the device is being moved. The agent
// retries it, more slowly than a connection failure.
func refused(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden)
}

// permanent reports whether the server rejected a message for what it is (400, 404, 413,
// 422, ...), so that sending it again cannot help.
func permanent(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && !refused(err) &&
		ae.Status != http.StatusRequestTimeout && ae.Status != http.StatusTooManyRequests
}

func (e *apiError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, e.Code, e.Message)
}

// client talks to the server's agent endpoints over HTTP.
type client struct {
	base  string // server address without /api/v1
	token string
	http  *http.Client
}

func newClient(server, token string) *client {
	return &client{base: strings.TrimRight(server, "/"), token: token, http: &http.Client{Timeout: 60 * time.Second}}
}

// apiPath fills {agentId} and {commandId} of an agentproto path.
func apiPath(p string, ids ...string) string {
	for _, id := range ids {
		i := strings.Index(p, "{")
		j := strings.Index(p, "}")
		if i < 0 || j < i {
			break
		}
		p = p[:i] + id + p[j+1:]
	}
	return "/api/v1" + p
}

func (c *client) do(ctx context.Context, method, path string, in, out any, header http.Header) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return readAPIError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// readAPIError reads an error answer; a body that is not the server's envelope (a proxy's
// page) becomes the message.
func readAPIError(resp *http.Response) *apiError {
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details []struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			} `json:"details"`
		} `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &env) != nil || env.Error.Code == "" {
		env.Error.Message = strings.TrimSpace(string(raw))
	}
	e := &apiError{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
	for _, d := range env.Error.Details {
		if d.Field == agentproto.DetailDeviceID {
			e.DeviceID = d.Message
		}
	}
	return e
}
