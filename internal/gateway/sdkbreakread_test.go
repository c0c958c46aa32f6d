package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKPathBrokenReadFailsOnlyIt: an HTTP upstream's broken answer to a
// resources/read, a prompts/get or a completion/complete (a JSON body that
// is not JSON, an answer to another id, an event that is not JSON, a 400
// text/plain) fails that request only: a tools/call in flight on the
// same go-sdk client session (SDK path: a progress token) gets its result,
// and the next read works at once, on the same upstream session. The
// go-sdk v1.8.0 client ended its session on these answers, failing the
// call beside it (its result lost, though it ran) and the next requests
// until toolgate reconnected (branch sdkbreak2).
func TestSDKPathBrokenReadFailsOnlyIt(t *testing.T) {
	verifyNoLeaks(t)
	up, url := newScriptedFeatureUpstream(t)
	g := newGateway(t, []ServerConfig{{Name: "up", URL: url}}, allowAll(), nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	before := waitUpstream(t, g, "up", nil)

	requests := []struct {
		method string
		do     func(ctx context.Context) (string, error)
	}{
		{"resources/read", func(ctx context.Context) (string, error) {
			r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static"})
			if err != nil || len(r.Contents) != 1 {
				return fmt.Sprint(r), err
			}
			return r.Contents[0].Text, nil
		}},
		{"prompts/get", func(ctx context.Context) (string, error) {
			r, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__greet", Arguments: map[string]string{"name": "bo"}})
			if err != nil || len(r.Messages) != 1 {
				return fmt.Sprint(r), err
			}
			if tc, ok := r.Messages[0].Content.(*mcp.TextContent); ok {
				return tc.Text, nil
			}
			return fmt.Sprint(r.Messages[0].Content), nil
		}},
		{"completion/complete", func(ctx context.Context) (string, error) {
			r, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "up__greet"},
				Argument: mcp.CompleteParamsArgument{Name: "name", Value: "b"}})
			if err != nil {
				return fmt.Sprint(r), err
			}
			return strings.Join(r.Completion.Values, ","), nil
		}},
	}
	answers := map[string]func(id string) string{}
	for _, c := range sdkBreakCases() {
		switch c.name {
		case "JSON body not JSON", "JSON body another id", "event not JSON", "plain text 400":
			answers[c.name] = c.raw
		}
	}
	for _, r := range requests {
		want, err := r.do(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", r.method, err)
		}
		for name, raw := range answers {
			t.Logf("%s: %s", r.method, name)
			h := newHeld()
			up.set("hang", h.answer)
			other := make(chan string, 1)
			go func() {
				p := &mcp.CallToolParams{Name: "up__hang", Arguments: map[string]any{}}
				sdkPathToken(p, "hang")
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
			<-h.arrived
			up.set(r.method, answerBytes(t, false, raw))
			if got, err := r.do(t.Context()); err == nil {
				t.Errorf("%s, %s: got %q, want an error", r.method, name, got)
			} else if !strings.Contains(err.Error(), "malformed response") {
				t.Errorf("%s, %s: error %v, want one saying the upstream sent a malformed response", r.method, name, err)
			}
			up.set(r.method, nil)
			close(h.release)
			if a := <-other; a != "held answer" {
				t.Errorf("%s, %s: the call in flight beside it got %q, want its result", r.method, name, a)
			}
			if got, err := r.do(t.Context()); err != nil || got != want {
				t.Errorf("%s, %s: the next request got %q, %v, want %q", r.method, name, got, err, want)
			}
			if now := waitUpstream(t, g, "up", nil); now != before {
				t.Fatalf("%s, %s: the upstream session was replaced", r.method, name)
			}
			up.takeCalls()
		}
	}

}
