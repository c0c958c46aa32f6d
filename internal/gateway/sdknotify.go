package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
)

// refusedNotice returns, for resp, the answer to a POST req that carries
// no request (a notification such as notifications/cancelled, or the
// answer to a server→client request), a 202 Accepted with no body in its
// place when resp is one the go-sdk v1.8.0 client would end its whole
// session on (attack18): a status other than 2xx, 404 (the session is
// gone) and the transient 500, 502, 503, 504 and 429, without a JSON-RPC
// error body (the SDK's checkResponse), or a 2xx naming another
// Mcp-Session-Id than the one req was sent in ("mismatching session
// IDs"). The message was refused or misrouted; nothing waits for an
// answer to it, and ending the session failed every call in flight on it
// (their results lost, though they ran). The refusal is logged (never the
// message's bytes). It returns nil, reading nothing, for any other resp;
// req's body is read (GetBody) only then, to tell such a POST from a
// request's, whose answer the SDK waits on (brokenStatus handles those
// that have an answer check).
func refusedNotice(ctx context.Context, req *http.Request, resp *http.Response, log *slog.Logger) *http.Response {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return nil
	}
	code := resp.StatusCode
	var why string
	switch {
	case code >= 200 && code < 300:
		sent := req.Header.Get("Mcp-Session-Id")
		if sent == "" {
			return nil
		}
		if got := resp.Header.Get("Mcp-Session-Id"); got == "" || got == sent {
			return nil
		}
		why = "an answer for another session"
	case code == http.StatusNotFound || isTransientStatus(code):
		return nil
	default:
		why = "HTTP status " + strconv.Itoa(code)
	}
	if !carriesNoRequest(req) {
		return nil
	}
	if why != "an answer for another session" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
		if err == nil && len(body) <= maxErrorBody && isWireErrorResponse(body) {
			resp.Body = readCloser{Reader: bytes.NewReader(body), c: resp.Body}
			return nil // the SDK takes it as a rejection of that message alone
		}
	}
	_ = resp.Body.Close()
	if log != nil {
		log.WarnContext(ctx, "HTTP upstream refused a notification or an answer toolgate sent it; the session goes on", "why", why, "status", code)
	}
	return &http.Response{
		Status: "202 Accepted", StatusCode: http.StatusAccepted, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: http.Header{}, Body: http.NoBody, Request: resp.Request,
	}
}

// isTransientStatus reports whether the go-sdk v1.8.0 client takes code
// for a transient failure of the one message (isTransientHTTPStatus).
func isTransientStatus(code int) bool {
	switch code {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// carriesNoRequest reports whether req's body (read again with GetBody) is
// a single JSON-RPC notification (other than notifications/initialized)
// or response: a message with no id, or one with no method.
func carriesNoRequest(req *http.Request) bool {
	rc, err := req.GetBody()
	if err != nil {
		return false
	}
	defer func() { _ = rc.Close() }()
	// The body is in memory (the SDK's and toolgate's POSTs are made
	// from bytes): decoded whole, its other members skipped.
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.NewDecoder(rc).Decode(&m) != nil {
		return false
	}
	if m.Method != nil && *m.Method == "notifications/initialized" {
		// Part of connecting: a refusal fails the connect, as before (a
		// session the server did not take as initialized would refuse
		// every call).
		return false
	}
	id := bytes.TrimSpace(m.ID)
	return len(id) == 0 || string(id) == "null" || m.Method == nil
}
