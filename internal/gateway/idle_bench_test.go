//go:build linux

package gateway

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/execpages"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkCallAfterRelease measures what the call after a quiet release
// (execpages.WhenQuiet) costs: /released unmaps the executable's pages
// (execpages.Release, untimed) before each call, /kept does not (each call
// finds the pages the previous one mapped). It reports the process's minor
// page faults per call: an upper bound on the gateway's, since the agent's
// client runs in this process too and maps its own code back as well.
// Stdio upstream, shared session, as BenchmarkCallThroughGatewayStdio.
func BenchmarkCallAfterRelease(b *testing.B) {
	for _, release := range []bool{true, false} {
		name := "kept"
		if release {
			name = "released"
		}
		b.Run(name, func(b *testing.B) {
			p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
			sc := stdioServer("up")
			sc.Sessions = SessionsShared
			cs := benchFront(b, []ServerConfig{sc}, gate.New(nil, policy.NewHolder(p), nil))
			call := func() {
				if res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: benchArgs}); err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
			}
			call()
			var faults, major int64
			var sys time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if release {
					if _, err := execpages.Release(); err != nil {
						b.Fatal(err)
					}
				}
				before, beforeMajor, beforeSys := pageFaults(b)
				b.StartTimer()
				call()
				b.StopTimer()
				after, afterMajor, afterSys := pageFaults(b)
				sys += afterSys - beforeSys
				faults += after - before
				major += afterMajor - beforeMajor
				b.StartTimer()
			}
			b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
			b.ReportMetric(float64(major)/float64(b.N), "major-faults/op")
			b.ReportMetric(float64(sys.Microseconds())/float64(b.N), "sys-us/op")
		})
	}
}
