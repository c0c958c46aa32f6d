package gateway

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestLeanParkedTokenCallEndsOnDeleteAndClose (attack21): a held 2025-era
// call with a progress token, parked and waited for on the beat's
// callbacks, is ended by its session's DELETE and by the gateway's Close
// as a call held on a goroutine is: answered under its id with the gate's
// result for a caller gone after its keep-alives, nothing run, its
// approval left pending for a re-send.
func TestLeanParkedTokenCallEndsOnDeleteAndClose(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the shared poller of parked connections is Linux's (epoll)")
	}
	verifyNoLeaks(t)
	for _, end := range []string{"delete", "close"} {
		t.Run(end, func(t *testing.T) {
			opts := HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Hour}
			f, base, parked, sid, version := parkedTokenSession(t, 5*time.Millisecond, &opts)
			c, host := dialRaw(t, base)
			if _, err := io.WriteString(c, rawSessionPOST(host, sid, version, "d-1", "up__big", `{"n":1}`, `{"progressToken":"d"}`)); err != nil {
				t.Fatal(err)
			}
			s := openTokenStream(t, c)
			f.waitState(t, approval.StatePending, 1)
			waitParkedCount(t, parked, 1)
			s.keepAlives(t, 3)
			switch end {
			case "delete":
				if resp, _ := sessionExchange(t, http.MethodDelete, base, aliceToken, sid, version, nil); resp.StatusCode != http.StatusNoContent {
					t.Fatalf("DELETE: %d", resp.StatusCode)
				}
			case "close":
				if err := f.g.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if last := s.rest(t); !strings.Contains(last, `"id":"d-1"`) || !strings.Contains(last, `"isError":true`) || !strings.Contains(last, "went away") {
				t.Errorf("answer after %s: %s, want the isError 'went away' result under id d-1", end, last)
			}
			f.waitState(t, approval.StatePending, 1)
			if n := f.h.count("big"); n != 0 {
				t.Errorf("the call ran %d times", n)
			}
		})
	}
}
