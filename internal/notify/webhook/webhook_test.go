package webhook

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/notify"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// message is a requested event whose display copy hides a token and
// escapes a bidi override, as the gate stores it.
func message() notify.Message {
	r := approval.Request{
		ID: "01900000-0000-7000-8000-000000000001", State: approval.StatePending, Server: "fs", Tool: "write_file",
		Arguments:       []byte(`{"path":"/srv/invoice\u202Efdp.exe","token":"[redacted: secret key name]"}`),
		ArgumentsHash:   "sha256:" + strings.Repeat("ab", 32),
		DisplayWarnings: []string{`"path" holds hidden characters (U+202E)`, `"token" was redacted`},
		Rule:            "writes", Mode: "hold", RequestedBy: "agent-1", OnBehalfOf: "alice",
		CreatedAt: t0, ExpiresAt: t0.Add(5 * time.Minute), RequiredApprovals: 1,
		Reason: "looks fine \u202E", // a reviewer's text is escaped on the way out too
	}
	return notify.Message{
		EventID: "0195f000-0000-7000-8000-00000000000e", Channel: "ops-hook", Attempt: 2, Request: r,
		Event: approval.Event{Seq: 42, RequestID: r.ID, Type: approval.EventRequested, State: approval.StatePending, Actor: "agent-1", At: t0},
	}
}

// receiver records requests and answers with status.
type receiver struct {
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
	status int
	header http.Header
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, b)
	rc.heads = append(rc.heads, r.Header.Clone())
	status, h := rc.status, rc.header
	rc.mu.Unlock()
	for k, v := range h {
		w.Header()[k] = v
	}
	if status == 0 {
		status = http.StatusNoContent
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "receiver's body, never logged")
}

func TestDeliver(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	secret := "whsec_test"
	w, err := New(srv.URL+"/hooks/s3cr3t-path", secret, &Options{PublicURL: "https://toolgate.example/", UserAgent: "toolgate/test", Now: func() time.Time { return t0.Add(time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	m := message()
	if ref, err := w.Deliver(t.Context(), m); err != nil || ref != "" {
		t.Fatalf("Deliver = %q, %v", ref, err)
	}
	if len(rc.bodies) != 1 {
		t.Fatalf("%d requests, want 1", len(rc.bodies))
	}
	body, h := rc.bodies[0], rc.heads[0]
	for k, want := range map[string]string{
		"Content-Type": "application/json", "User-Agent": "toolgate/test",
		HeaderEventID: m.EventID, HeaderAttempt: "2",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if err := Verify([]byte(secret), h.Get(HeaderSignature), body, t0.Add(time.Minute), Tolerance); err != nil {
		t.Errorf("Verify = %v", err)
	}
	if !strings.HasPrefix(h.Get(HeaderSignature), "t=1772366401,v1=") {
		t.Errorf("signature %q, want t = the send time", h.Get(HeaderSignature))
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	a := got["approval"].(map[string]any)
	for k, want := range map[string]any{
		"id": m.EventID, "type": "requested", "seq": 42.0, "at": "2026-03-01T12:00:00Z", "actor": "agent-1",
		"state": "pending", "channel": "ops-hook", "inbox_url": "https://toolgate.example/ui/approvals/" + string(m.Request.ID),
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	for k, want := range map[string]any{
		"id": string(m.Request.ID), "server": "fs", "tool": "write_file", "rule": "writes",
		"requested_by": "agent-1", "on_behalf_of": "alice", "expires_at": "2026-03-01T12:05:00Z",
		"arguments_hash": m.Request.ArgumentsHash,
	} {
		if a[k] != want {
			t.Errorf("approval.%s = %v, want %v", k, a[k], want)
		}
	}
	// The display copy as stored (the token already hidden), and hidden
	// characters escaped in the bytes sent.
	wantArgs := map[string]any{"path": "/srv/invoice\u202Efdp.exe", "token": "[redacted: secret key name]"} //nolint:gosec // G101: a redaction marker, not a credential
	if diff := cmp.Diff(wantArgs, a["arguments"]); diff != "" {
		t.Errorf("arguments (-want +got):\n%s", diff)
	}
	if strings.Contains(string(body), "\u202E") || !strings.Contains(string(body), `\u202E`) {
		t.Errorf("body does not escape U+202E: %s", body)
	}
	if strings.Contains(string(body), `\u003c`) || strings.Contains(string(body), "\n") {
		t.Errorf("body is HTML-escaped or not compact: %s", body)
	}
}

func TestDeliverFailures(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	secretURL := srv.URL + "/hooks/s3cr3t-path?key=k3y"
	w, err := New(secretURL, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Deliver = %v, want %q", name, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "k3y") || strings.Contains(err.Error(), "never logged")) {
			t.Errorf("%s: the error leaks the URL or the body: %v", name, err)
		}
	}
	rc.status = http.StatusInternalServerError
	_, err = w.Deliver(t.Context(), message())
	check("500", err, "receiver answered 500")
	if _, ok := notify.RetryAfterOf(err); ok || notify.IsPermanent(err) || notify.IsRefused(err) {
		t.Errorf("500: %v asks for a wait, is permanent or a refusal", err)
	}

	// 401 and 403 (a secret the receiver does not share) are refusals:
	// retried, but logged at WARN (branch tasks47).
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		rc.status = status
		_, err = w.Deliver(t.Context(), message())
		check(strconv.Itoa(status), err, "receiver answered "+strconv.Itoa(status))
		if !notify.IsRefused(err) || notify.IsPermanent(err) {
			t.Errorf("%d: %v is not a (retried) refusal", status, err)
		}
	}

	rc.status, rc.header = http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}}
	_, err = w.Deliver(t.Context(), message())
	check("429", err, "receiver answered 429")
	if d, ok := notify.RetryAfterOf(err); !ok || d != 30*time.Second {
		t.Errorf("429 with Retry-After 30: wait %v, %v", d, ok)
	}

	// A redirect is not followed: the signed body goes nowhere else.
	var followed bool
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed = true }))
	defer other.Close()
	rc.status, rc.header = http.StatusTemporaryRedirect, http.Header{"Location": {other.URL}}
	_, err = w.Deliver(t.Context(), message())
	check("307", err, "receiver answered 307")
	if followed {
		t.Errorf("the redirect was followed")
	}

	// Nobody listening.
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/hooks/s3cr3t-path?key=k3y"
	_ = ln.Close()
	w2, err := New(down, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w2.Deliver(t.Context(), message())
	check("refused", err, "connection refused")
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []struct{ url, secret string }{
		{"ftp://x/s3cr3t", "s"}, {"https:///s3cr3t", "s"}, {"http://x/%zz-s3cr3t", "s"}, {"https://x/", ""},
	} {
		_, err := New(c.url, c.secret, nil)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("New(%q, %q) = %v, want an error that does not repeat the URL", c.url, c.secret, err)
		}
	}
}

func TestVerify(t *testing.T) {
	secret := []byte("whsec")
	body := []byte(`{"id":"e1"}`)
	sig := Sign(secret, t0, body)
	other := Sign([]byte("other"), t0, body)
	cases := []struct {
		name   string
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"valid", sig, body, t0, nil},
		{"4m59s old", sig, body, t0.Add(4*time.Minute + 59*time.Second), nil},
		{"older than 5 minutes", sig, body, t0.Add(5*time.Minute + time.Second), ErrStale},
		{"from the future", sig, body, t0.Add(-6 * time.Minute), ErrStale},
		{"body changed", sig, []byte(`{"id":"e2"}`), t0, ErrBadSignature},
		{"other secret", other, body, t0, ErrBadSignature},
		{"t changed", strings.Replace(sig, "t=1772366400", "t=1772366401", 1), body, t0, ErrBadSignature},
		{"one of two v1 valid (a rotated secret)", other + "," + strings.Split(sig, ",")[1], body, t0, nil},
		{"no v1", "t=1772366400", body, t0, ErrBadSignature},
		{"no t", strings.Split(sig, ",")[1], body, t0, ErrBadSignature},
		{"garbage", "hello", body, t0, ErrBadSignature},
		{"empty", "", body, t0, ErrBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Verify(secret, c.header, c.body, c.now, Tolerance); !errors.Is(err, c.want) {
				t.Errorf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	for _, c := range []struct {
		status int
		value  string
		want   time.Duration
		ok     bool
	}{
		{429, "12", 12 * time.Second, true},
		{503, "0", 0, true},
		{503, "86400", time.Hour, true},
		{500, "12", 0, false},
		{429, "soon", 0, false},
		{429, "", 0, false},
	} {
		r := &http.Response{StatusCode: c.status, Header: http.Header{"Retry-After": {c.value}}, Body: http.NoBody}
		if d, ok := RetryAfter(r); d != c.want || ok != c.ok {
			t.Errorf("RetryAfter(%d, %q) = %v, %v; want %v, %v", c.status, c.value, d, ok, c.want, c.ok)
		}
		_ = r.Body.Close()
	}
}
