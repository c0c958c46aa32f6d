package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestSDKPathCredentialsRefusedFailsOnlyTheCall: an HTTP upstream that
// answers one SDK-path call (a progress token) with 401 or 403 refused it
// before running it: that call fails saying nothing was run (as on the
// raw path), while a call in flight beside it on the same go-sdk client
// session gets its result and the next call works, on the same upstream
// session. The go-sdk v1.8.0 client ended its session on a 401 or 403:
// the refused call was told it "may have run", the call beside it lost
// its result although it ran, and the next call was refused with
// "reconnecting" (branch sdkbreak2).
func TestSDKPathCredentialsRefusedFailsOnlyTheCall(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	before := waitUpstream(t, f.g, "up", nil)
	for i, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		h := newHeld()
		f.up.set("hang", h.answer)
		f.up.set("vendor", func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, http.StatusText(code), code)
		})
		other := make(chan string, 1)
		go func() { other <- f.sdkCall(t, fmt.Sprintf("held-%d", i), "hang", `{}`) }()
		<-h.arrived
		if got := f.sdkCall(t, fmt.Sprintf("refused-%d", i), "vendor", `{}`); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "nothing was run") {
			t.Errorf("%d: the refused call's answer %q, want an isError saying nothing was run", code, got)
		}
		close(h.release)
		if a := <-other; !strings.Contains(a, "held answer") || strings.Contains(a, `"isError":true`) {
			t.Errorf("%d: the call in flight beside it got %q, want its result", code, a)
		}
		if a := f.sdkCall(t, fmt.Sprintf("next-%d", i), "echo", `{"n":1}`); !strings.Contains(a, `{\"n\":1}`) {
			t.Errorf("%d: the next call got %q, want its result", code, a)
		}
		if now := waitUpstream(t, f.g, "up", nil); now != before {
			t.Fatalf("%d: the upstream session was replaced", code)
		}
		if n := len(f.up.takeCalls()); n != 3 {
			t.Errorf("%d: the upstream got %d tools/call POSTs, want 3", code, n)
		}
	}
}
