package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestInitializeRacingCloseOpensNoSession (branch flake51): an agent's
// initialize that passed the HTTP front's "Close has not begun" check just
// before Close began, and reaches the gateway's middleware after Close's
// sweep of the agent sessions, opens no session that outlives Close: it
// is refused, and the SDK closes the session it had made for it. On
// a2628f8c it was answered and its session registered after the sweep (or,
// with DisableLeanCalls, never), so nobody closed it.
func TestInitializeRacingCloseOpensNoSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *HTTPOptions
	}{{"lean", nil}, {"sdk", &HTTPOptions{DisableLeanCalls: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			verifyNoLeaks(t)
			g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(newHooks()))}}, allowAll(), nil)
			reached, release := make(chan struct{}), make(chan struct{})
			g.initHook = func() {
				close(reached)
				<-release
			}
			base := serveHTTP(t, g, tc.opts)

			type answer struct {
				status int
				sid    string
				body   []byte
				err    error
			}
			answered := make(chan answer, 1)
			go func() {
				var a answer
				a.status, a.sid, a.body, a.err = postInitialize(context.WithoutCancel(t.Context()), http.DefaultClient, base, aliceToken, 1)
				answered <- a
			}()
			<-reached // past the front's check, before the session is registered
			if n := countSessions(g.server); n != 1 {
				t.Fatalf("the gateway's SDK server has %d sessions while the initialize waits, want 1", n)
			}
			closed := make(chan error, 1)
			go func() { closed <- g.Close() }()
			// Close's steps wait for nothing the initialize holds: it
			// returns before the initialize goes on.
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			close(release)
			a := <-answered
			if a.err != nil {
				t.Fatal(a.err)
			}
			if a.status == http.StatusOK && !strings.Contains(string(a.body), `"error"`) {
				t.Errorf("initialize during Close was served: %d, %s", a.status, a.body)
			}
			// The SDK drops the session once the POST ended; one nobody
			// closed never leaves the list.
			waitUntil(t, func() bool { return countSessions(g.server) == 0 })
		})
	}
}

// TestCloseEndsTheAgentSessionsWithoutLeanCalls (branch flake51): Close
// closes the agent sessions open on the HTTP front with DisableLeanCalls
// too; on a2628f8c only the lean front's sessions were watched, and Close
// left these open.
func TestCloseEndsTheAgentSessionsWithoutLeanCalls(t *testing.T) {
	verifyNoLeaks(t)
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(newHooks()))}}, allowAll(), nil)
	base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: true})
	cs := connectAgent(t, base, aliceToken, nil, nil)
	if n := countSessions(g.server); n != 1 {
		t.Fatalf("the gateway's SDK server has %d sessions, want 1", n)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	// A session Close ended leaves the SDK's list; one it left open
	// never does.
	waitUntil(t, func() bool { return countSessions(g.server) == 0 })
	_ = cs.Close()
}
