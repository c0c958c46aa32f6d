package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLeanHTTPCancelEveryBody (branch attack44b): a notifications/cancelled
// POST naming a lean call in flight cancels it however the SDK would
// cancel a call of its own by it. The SDK's canceller reads every body it
// is sent, whatever its length or framing, and cancels on a message that
// carries an id too (and answers it). On 70feee3f cancelLean passed over a
// body sent chunked (no Content-Length), one longer than 4096 bytes (a long
// reason), and one with an exact id: each went to the SDK, which does not
// know the lean call, and the call ran on.
func TestLeanHTTPCancelEveryBody(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	for i, c := range []struct {
		name string
		body func(id int) io.Reader
	}{
		{"with an id", func(id int) io.Reader {
			return strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"notifications/cancelled","params":{"requestId":%d}}`, id))
		}},
		{"chunked", func(id int) io.Reader {
			// A reader of no known length: the client sends it chunked.
			return io.MultiReader(strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id)))
		}},
		{"a long reason", func(id int) io.Reader {
			return strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":%q}}`, id, strings.Repeat("r", 5000)))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := 60 + i
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp := sessionRequest(t, http.MethodPost, f.base, aliceToken, sid, version,
					strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__sleep","arguments":{}}}`, id)))
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}()
			select {
			case <-f.h.started:
			case <-time.After(testWait):
				t.Fatal("the sleep call never reached the upstream")
			}
			ex, _ := sessionExchange(t, http.MethodPost, f.base, aliceToken, sid, version, c.body(id))
			t.Logf("the cancel was answered %+v", ex)
			select {
			case cause := <-f.h.ended:
				t.Logf("the lean call's upstream call ended: %v", cause)
			case <-time.After(testWait):
				t.Fatal("the cancel did not cancel the lean call")
			}
			<-done
		})
	}
}
