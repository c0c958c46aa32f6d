package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKPathRefusedNotificationKeepsTheSession (attack18): an HTTP
// upstream that refuses the notifications/cancelled the go-sdk client
// POSTs when an agent cancels an SDK-path call (a 400 text/plain, as a
// server that does not take the notification may answer) ends nothing
// else: a tools/call in flight beside it on the same upstream session
// gets its result. So does a 202 to it that names another Mcp-Session-Id.
// The go-sdk v1.8.0 client took either for a broken connection and ended
// its session, and with it every call in flight (their results lost,
// though they ran).
func TestSDKPathRefusedNotificationKeepsTheSession(t *testing.T) {
	verifyNoLeaks(t)
	for name, refuse := range map[string]func(http.ResponseWriter){
		"400 text/plain": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("unsupported"))
		},
		"202 for another session": func(w http.ResponseWriter) {
			w.Header().Set("Mcp-Session-Id", "another")
			w.WriteHeader(http.StatusAccepted)
		},
	} {
		t.Run(name, func(t *testing.T) { refusedNotificationBeside(t, refuse) })
	}
}

// refusedNotificationBeside runs TestSDKPathRefusedNotificationKeepsTheSession
// with the upstream answering notifications/cancelled with refuse.
func refusedNotificationBeside(t *testing.T, refuse func(http.ResponseWriter)) {
	t.Helper()
	up, url := scriptedUpstreamOf(t, newFeatureServer("f", nil), true, "hang", "stuck", "quick")
	logs := &logBuffer{}
	g := newGateway(t, []ServerConfig{{Name: "up", URL: url}}, allowAll(), &Options{Logger: logs.logger()})
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	before := waitUpstream(t, g, "up", nil)

	refused := make(chan struct{}, 1)
	up.set("notifications/cancelled", func(w http.ResponseWriter, _ *http.Request, _ json.RawMessage) {
		refuse(w)
		select {
		case refused <- struct{}{}:
		default:
		}
	})
	stuckArrived := make(chan struct{}, 1)
	up.set("stuck", func(_ http.ResponseWriter, r *http.Request, _ json.RawMessage) {
		stuckArrived <- struct{}{}
		<-r.Context().Done() // until the gateway gives up on it
	})
	h := newHeld()
	up.set("hang", h.answer)
	release := sync.OnceFunc(func() { close(h.release) })
	defer release() // a failed test ends too
	call := func(ctx context.Context, tool string, out chan<- string) {
		p := &mcp.CallToolParams{Name: "up__" + tool, Arguments: map[string]any{}}
		p.SetProgressToken(tool) // the SDK path
		res, err := cs.CallTool(ctx, p)
		switch {
		case err != nil:
			out <- err.Error()
		case res.IsError:
			out <- "isError " + textOf(t, res)
		default:
			out <- textOf(t, res)
		}
	}
	beside := make(chan string, 1)
	go call(context.WithoutCancel(t.Context()), "hang", beside)
	<-h.arrived
	cctx, cancel := context.WithCancel(t.Context())
	cancelled := make(chan string, 1)
	go call(cctx, "stuck", cancelled)
	<-stuckArrived
	cancel() // the agent cancels: the gateway's go-sdk client tells the upstream
	<-cancelled
	<-refused
	// Either the refusal is taken (logged) and the session goes on, or the
	// go-sdk ends the session (the gateway logs it and reconnects).
	// A session the go-sdk keeps but whose connection took the answer for
	// a failed write refuses every later call: calls go on until one
	// fails or the refusal is logged.
	stop := make(chan struct{})
	var probing sync.WaitGroup
	defer probing.Wait()
	defer close(stop)
	probe := make(chan string, 1)
	probing.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			p := &mcp.CallToolParams{Name: "up__quick", Arguments: map[string]any{}}
			p.SetProgressToken("quick")
			res, err := cs.CallTool(t.Context(), p)
			if err != nil || res.IsError {
				probe <- fmt.Sprint(res, err)
				return
			}
		}
	})
	select {
	case <-logSignal(logs, "refused a notification", stop):
	case <-logSignal(logs, "upstream unavailable; reconnecting", stop):
		t.Fatalf("the refused notifications/cancelled ended the upstream session:\n%s", logs.String())
	case a := <-beside:
		t.Fatalf("the call in flight beside the cancelled one ended before its answer: %q", a)
	case a := <-probe:
		t.Fatalf("a call after the refused notifications/cancelled failed: %s", a)
	}
	release()
	if a := <-beside; a != "held answer" {
		t.Errorf("the call in flight beside the cancelled one got %q, want its result", a)
	}
	if now := waitUpstream(t, g, "up", nil); now != before {
		t.Errorf("the upstream session was replaced")
	}
}

// logSignal returns a channel closed once l's log contains s (or never,
// if stop is closed first).
func logSignal(l *logBuffer, s string, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for {
			l.mu.Lock()
			if strings.Contains(l.buf.String(), s) {
				l.mu.Unlock()
				close(done)
				return
			}
			if l.changed == nil {
				l.changed = make(chan struct{})
			}
			ch := l.changed
			l.mu.Unlock()
			select {
			case <-ch:
			case <-stop:
				return
			}
		}
	}()
	return done
}
