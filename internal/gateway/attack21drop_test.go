package gateway

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLeanModernTokenAllowedDrop (attack21): an allowed 2026-07-28 call
// with a progress token whose client drops its connection after the
// upstream's first progress is cancelled upstream, on the lean front as on
// the SDK path (HTTP and stdio upstreams): the upstream's handler ends on
// the cancellation instead of running on for a client gone.
func TestLeanModernTokenAllowedDrop(t *testing.T) {
	verifyNoLeaks(t)
	for _, kind := range []string{"http", "stdio"} {
		t.Run(kind, func(t *testing.T) {
			h := newHooks()
			up := ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}
			if kind == "stdio" {
				up = stdioServer("up")
			}
			opts := HTTPOptions{DropGrace: time.Hour}
			f := newLeanProgFixture(t, up, h, time.Hour, &opts)
			waitUpstream(t, f.g, "up", nil)
			sdk := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true, DropGrace: time.Hour})
			for i, base := range []string{f.base, sdk} {
				f.trail.take()
				c, host := dialRaw(t, base)
				if _, err := io.WriteString(c, rawModernTokenRequest(host, `"s-1"`, "up__sleep", `{}`, `"s-1"`)); err != nil {
					t.Fatal(err)
				}
				wr := newWireReader(c)
				line, err := wr.br.ReadString('\n')
				for err == nil && !strings.HasPrefix(line, "data: ") {
					line, err = wr.br.ReadString('\n')
				}
				if err != nil || !strings.Contains(line, `"progressToken":"s-1","message":"sleeping"`) {
					t.Fatalf("path %d: no progress before the drop: %v\n%q", i, err, wr.raw.Bytes())
				}
				_ = c.Close()
				if kind == "http" {
					select {
					case err := <-h.ended:
						if err == nil {
							t.Errorf("path %d: the upstream's call ended without a cause", i)
						}
					case <-time.After(testWait):
						t.Fatalf("path %d: the upstream's call was not cancelled after the client dropped", i)
					}
				}
				if i == 0 {
					if tr := f.trail.take(); !slices.Contains(tr, true) {
						t.Errorf("lean trail %v, want the call served by the lean front", tr)
					}
				}
			}
		})
	}
}
