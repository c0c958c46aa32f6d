package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"toolgate/internal/api"
)

// requestTimeout bounds one request to the admin API.
const requestTimeout = 30 * time.Second

// maxResponse caps the bytes read from a response.
const maxResponse = 16 << 20

// client talks to the admin API.
type client struct {
	base  string // scheme://host[:port][/path], no trailing slash
	addr  string // the address as given, for messages
	token string
	http  *http.Client
}

// newClient returns a client for addr: "http://host:port", "https://...",
// a bare "host:port" (http), or "unix:///abs/path.sock". A malformed addr is
// a usage error.
func newClient(addr, token string) (*client, error) {
	c := &client{addr: addr, token: token, http: &http.Client{Timeout: requestTimeout}}
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if !filepath.IsAbs(path) {
			return nil, usagef("--addr %q: want unix:///absolute/path.sock", addr)
		}
		c.base = "http://toolgate"
		c.http.Transport = &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
		}
		return c, nil
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, usagef("--addr %q: want http://host:port, https://host:port or unix:///abs/path.sock", addr)
	}
	if u.Port() == "" && u.Scheme == "http" {
		// Plain HTTP would dial port 80, which toolgate never listens on by
		// default: "localhost" is almost surely a forgotten :7071. An
		// https:// address may leave its port (443) to a TLS proxy in front.
		return nil, usagef("--addr %q has no port (it would dial port 80): want http://host:port, e.g. %s, the admin listener's default", c.addr, DefaultAddr)
	}
	c.base = strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/")
	return c, nil
}

// httpError is an error answer of the admin API.
type httpError struct {
	Status  int
	Code    string
	Message string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// response is a successful answer: its body and the server's clock.
type response struct {
	body []byte
	now  time.Time
}

// do sends method path with body (JSON-encoded when not nil) and returns the
// 2xx response, or an *httpError for an error answer.
func (c *client) do(ctx context.Context, method, path string, body any) (response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return response{}, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return response{}, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, c.requestError(method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		err := decodeError(resp.StatusCode, b)
		var he *httpError
		if errors.As(err, &he) && he.Status == http.StatusNotFound && he.Message == "no such route" {
			// The agent listener answers this for every admin path.
			return response{}, fmt.Errorf("%w: is %s toolgate's admin listener (listen.admin), not its agent listener? (--addr or %s)", err, c.addr, EnvAddr)
		}
		return response{}, err
	}
	now := time.Now()
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		now = d
	}
	return response{body: b, now: now}, nil
}

// decodeError turns an error answer into an *httpError, keeping the
// server's code and message (or a short excerpt of a non-JSON body).
func decodeError(status int, b []byte) error {
	var eb api.ErrorBody
	if err := json.Unmarshal(b, &eb); err == nil && eb.Error.Code != "" {
		return &httpError{Status: status, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &httpError{Status: status, Code: strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_"), Message: msg}
}

// get fetches path and decodes it into v.
func (c *client) get(ctx context.Context, path string, v any) (response, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return resp, err
	}
	if err := json.Unmarshal(resp.body, v); err != nil {
		return resp, fmt.Errorf("GET %s: decode response: %w", path, err)
	}
	return resp, nil
}

// requestError wraps the error of a request that got no answer; when
// nothing listens at the admin address (a gateway not started, the wrong
// port, a socket that does not exist) it asks whether serve runs there.
func (c *client) requestError(method, path string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL is in the message already below
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%s %s: %w: is toolgate serve running, with its admin listener at %s? (--addr or %s)",
			method, path, err, c.addr, EnvAddr)
	}
	return fmt.Errorf("%s %s: %w", method, path, err)
}
