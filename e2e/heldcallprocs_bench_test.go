package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// heldProcsPolicy holds t__slow for a human and allows the rest.
const heldProcsPolicy = `
approvals:
  max_hold: 0s
policy:
  default: allow
  rules:
    - name: held
      server: t
      tools: [slow]
      effect: approve
      approval: { timeout: 10m }
`

// BenchmarkHeldCallProcs measures procs.Follow with one call held (a
// go-sdk client's call with a progress token, never decided; served by the
// lean front since branch leanprog, by the SDK path before, when the
// benchmark was BenchmarkHeldSDKCallProcs) while one other caller makes
// allowed calls one at a time (C=1): the share of GOMAXPROCS samples
// (procsWatch) that read one P (oneP-%). A held call counted in
// Options.Load for its whole hold made every look see two calls in flight
// (0 % on one P); out of the count while it waits (branch tidy15) the
// caller is alone.
// TOOLGATE_PROCS_BEFORE=1 measures the binary at $TMPDIR/toolgate-before
// instead (build the tree before there, for interleaved before/after
// pairs); the default is the one this tree built.
func BenchmarkHeldCallProcs(b *testing.B) {
	bin := bins.toolgate
	if os.Getenv("TOOLGATE_PROCS_BEFORE") == "1" {
		bin = filepath.Join(os.TempDir(), "toolgate-before")
	}
	dir := b.TempDir()
	g := startGatewayBin(b, bin, gatewayConfig(filepath.Join(dir, "gw.db"), upstreamServer(filepath.Join(dir, "record.log"))+heldProcsPolicy), nil)
	bg := &benchGateway{MCP: g.MCP, Admin: g.Admin, tr: g.tr}
	held := bg.connect(b)
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	p := toolCall("t__slow", `{}`)
	p.SetProgressToken("held")
	answered := make(chan error, 1)
	go func() {
		_, err := held.CallTool(ctx, p)
		answered <- err
	}()
	for deadline := time.Now().Add(waitFor(b)); len(approvals(b, g.Admin, "pending")) != 1; time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			b.Fatal("the call was not held")
		}
	}
	caller := bg.connect(b)
	call := toolCall("t__echo_raw", `{"x":1}`)
	w := watchProcs(b.Context(), g.Admin)
	for b.Loop() {
		res, err := caller.CallTool(b.Context(), call)
		if err != nil || res.IsError {
			b.Fatalf("allowed call: %v %+v", err, res)
		}
	}
	b.ReportMetric(w.stop(), "oneP-%")
	select {
	case err := <-answered:
		b.Fatalf("the held call was answered: %v", err)
	default:
	}
}
