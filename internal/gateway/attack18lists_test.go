package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKPathBrokenListOrSubscribeFailsOnlyIt (attack18): an HTTP
// upstream's broken answer (a 400 text/plain, a JSON body that is not
// JSON, an answer to another id, an event that is not JSON) to a request
// toolgate sends on the shared go-sdk session besides calls and reads,
// prompts/list, resources/list and resources/templates/list (listing the
// upstream's items after a connect or list_changed), resources/subscribe
// and resources/unsubscribe (an agent's subscription) and logging/setLevel
// (an agent's level), fails that request only. The go-sdk v1.8.0 client
// ended its session on it, as on a broken answer to a resources/read
// before sdkbreak2, and with it a tools/call in flight beside it (its
// result lost, though it ran); these requests had no answer check.
func TestSDKPathBrokenListOrSubscribeFailsOnlyIt(t *testing.T) {
	verifyNoLeaks(t)
	up, url := newScriptedFeatureUpstream(t)
	g := newGateway(t, []ServerConfig{{Name: "up", URL: url}}, allowAll(), nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	before := waitUpstream(t, g, "up", nil)
	u := g.ups["up"]

	if res := before.cs.InitializeResult(); res == nil || res.Capabilities == nil || res.Capabilities.Logging == nil {
		t.Fatal("the upstream offers no logging: logging/setLevel would not be sent")
	}
	levels := []mcp.LoggingLevel{"debug", "info"}
	requests := []struct {
		method string
		do     func(ctx context.Context) error
		quiet  bool // its error is only logged: the caller sees none
	}{
		{"prompts/list", func(ctx context.Context) error { _, err := u.listItems(ctx, before.cs); return err }, false},
		{"resources/list", func(ctx context.Context) error { _, err := u.listItems(ctx, before.cs); return err }, false},
		{"resources/templates/list", func(ctx context.Context) error { _, err := u.listItems(ctx, before.cs); return err }, false},
		{"resources/subscribe", func(ctx context.Context) error {
			err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://static"})
			if err == nil {
				// Subscribed: the next subscribe of the URI sends nothing upstream.
				err = cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://static"})
			}
			return err
		}, false},
		{"resources/unsubscribe", func(ctx context.Context) error {
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://static"}); err != nil {
				return err
			}
			return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://static"})
		}, false},
		{"logging/setLevel", func(ctx context.Context) error {
			levels[0], levels[1] = levels[1], levels[0]
			u.setLoggingLevel(ctx, before, func() mcp.LoggingLevel { return levels[0] })
			return nil
		}, true},
	}
	answers := map[string]func(id string) string{}
	for _, c := range sdkBreakCases() {
		switch c.name {
		case "JSON body not JSON", "JSON body another id", "event not JSON", "plain text 400":
			answers[c.name] = c.raw
		}
	}
	// A hang guard, not a timing assertion: the go-sdk drops an answer
	// to another id, and the request waits for one.
	guarded := func(do func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(t.Context(), testWait)
		defer cancel()
		return do(ctx)
	}
	for _, r := range requests {
		if err := guarded(r.do); err != nil {
			t.Fatalf("%s, unscripted: %v", r.method, err)
		}
		for name, raw := range answers {
			h := newHeld()
			up.set("hang", h.answer)
			other := make(chan string, 1)
			go func() {
				p := &mcp.CallToolParams{Name: "up__hang", Arguments: map[string]any{}}
				p.SetProgressToken("hang")
				res, err := cs.CallTool(context.WithoutCancel(t.Context()), p)
				switch {
				case err != nil:
					other <- err.Error()
				case res.IsError:
					other <- "isError " + textOf(t, res)
				default:
					other <- textOf(t, res)
				}
			}()
			select {
			case <-h.arrived:
			case a := <-other:
				t.Fatalf("%s, %s: the call to hold at the upstream ended first: %q", r.method, name, a)
			}
			up.set(r.method, answerBytes(t, false, raw))
			err := guarded(r.do)
			switch {
			case r.quiet: // only logged; what matters is the call beside it
			case err == nil:
				t.Errorf("%s, %s: no error, want one", r.method, name)
			case !strings.Contains(err.Error(), "malformed response"):
				t.Errorf("%s, %s: error %v, want one saying the upstream sent a malformed response", r.method, name, err)
			}
			up.set(r.method, nil)
			close(h.release)
			if a := <-other; a != "held answer" {
				t.Errorf("%s, %s: the call in flight beside it got %q, want its result", r.method, name, a)
			}
			if err := guarded(r.do); err != nil {
				t.Errorf("%s, %s: the next request failed: %v", r.method, name, err)
			}
			if now := waitUpstream(t, g, "up", nil); now != before {
				t.Fatalf("%s, %s: the upstream session was replaced", r.method, name)
			}
		}
	}
}
