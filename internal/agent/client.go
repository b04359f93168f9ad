package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// apiError is an error answer of the server, in its envelope.
type apiError struct {
	Status  int
	Code    string
	Message string
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
		var env struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(raw, &env) != nil || env.Error.Code == "" {
			env.Error.Message = strings.TrimSpace(string(raw))
		}
		return &apiError{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
