package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// postResponse is what post read of a response (its body is closed).
type postResponse struct {
	StatusCode int
	Header     http.Header
}

func post(t *testing.T, url, token, session, body string) (postResponse, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return postResponse{StatusCode: resp.StatusCode, Header: resp.Header}, string(b)
}

func TestHTTPFront(t *testing.T) {
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
	url := serveHTTP(t, g, &HTTPOptions{MaxBody: 1024}) + "/mcp"
	listTools := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`

	tests := []struct {
		name       string
		token      string
		session    string
		body       string
		wantStatus int
		wantAuth   string // WWW-Authenticate contains
		wantBody   string // the body contains
	}{
		{name: "missing bearer", body: initializeBody, wantStatus: http.StatusUnauthorized, wantAuth: "Bearer", wantBody: `missing bearer token: send the header "Authorization: Bearer <agent token>"`},
		// An approver's token sent here by mistake: the answer says which token /mcp takes.
		{name: "bad bearer", token: "nope", body: initializeBody, wantStatus: http.StatusUnauthorized, wantAuth: "invalid_token", wantBody: "takes an agent's token (agents[] in the config, a session's token, or the agent token the running serve --dev printed: each start prints new ones)"},
		{name: "unknown session (C04)", token: aliceToken, session: "nope", body: listTools, wantStatus: http.StatusNotFound},
		{name: "body too large", token: aliceToken, body: `{"pad":"` + strings.Repeat("x", 2048) + `"}`, wantStatus: http.StatusRequestEntityTooLarge},
		{name: "initialize", token: aliceToken, body: initializeBody, wantStatus: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, url, tt.token, tt.session, tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); !strings.Contains(got, tt.wantAuth) || (tt.wantAuth == "") != (got == "") {
				t.Errorf("WWW-Authenticate %q, want it to contain %q", got, tt.wantAuth)
			}
			if !strings.Contains(body, tt.wantBody) {
				t.Errorf("body %q, want it to contain %q", body, tt.wantBody)
			}
		})
	}
}

func TestSessionBoundToPrincipal(t *testing.T) {
	// Another agent cannot use alice's session.
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
	base := serveHTTP(t, g, nil)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	resp, body := post(t, base+"/mcp", bobToken, cs.ID(), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob on alice's session: %d %s, want 403", resp.StatusCode, body)
	}
}

func TestPrincipalHeaderNotTrusted(t *testing.T) {
	// A client-sent carrier header neither names a principal nor breaks the
	// call: the front overwrites it.
	var got []string
	gk := gatekeeperFunc(func(_ context.Context, c gate.Call) gate.Admission {
		got = append(got, c.Principal.ID)
		return gate.Admission{Allowed: true}
	})
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, gk, nil)
	base := serveHTTP(t, g, nil)
	cs := connectHTTP(t, base, bobToken, nil, func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set(carrierHeader, "forged")
			return rt.RoundTrip(r)
		})
	})
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo"}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "bob" {
		t.Errorf("principals %v, want [bob]", got)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestInsecureNoAuth(t *testing.T) {
	g := newGateway(t, nil, allowAll(), nil)
	if _, err := g.Handler(nil, &HTTPOptions{InsecureNoAuth: true, ListenAddr: "0.0.0.0:7070"}); err == nil {
		t.Error("InsecureNoAuth on 0.0.0.0: no error")
	}
	if _, err := g.Handler(nil, nil); err == nil {
		t.Error("nil Authenticator without InsecureNoAuth: no error")
	}
	h, err := g.Handler(nil, &HTTPOptions{InsecureNoAuth: true, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	resp, body := post(t, ts.URL+"/mcp", "", "", initializeBody)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("initialize without a token: %d %s", resp.StatusCode, body)
	}
}

func TestIsLoopbackAddr(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7070", true},
		{"[::1]:7070", true},
		{"localhost:7070", true},
		{"127.0.0.1", true},
		{"0.0.0.0:7070", false},
		{":7070", false},
		{"10.0.0.1:7070", false},
		{"example.com:7070", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isLoopbackAddr(tt.addr); got != tt.want {
			t.Errorf("isLoopbackAddr(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}
