package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// leasePolicy holds every t__echo_raw call (timeout 1m) with a short lease,
// so that an abandoned request is taken over within a second.
const leasePolicy = `
approvals:
  lease: 1s
` + heldEchoPolicy

// TestRestartKeepsPending is case C13: a call is held, the gateway is killed
// with SIGKILL and restarted on the same SQLite file. Exactly one request
// exists, still pending, with the same expires_at; the identical re-send from
// a new client attaches to it (no second request); approving it runs the
// upstream once.
func TestRestartKeepsPending(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+leasePolicy)
	const args = `{"amount":12,"to":"acct-9"}`

	first := startGateway(t, cfg, nil)
	cs := first.connect(t, nil, nil)
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	before := awaitPendingArgs(t, first.Admin, args)
	start := time.Now()
	first.kill(t)
	if r := await(t, ch); r.err == nil {
		t.Fatalf("the held call returned %v after its gateway was killed, want a transport error", text(r.res))
	}

	second := startGateway(t, cfg, nil)
	t.Logf("timing: killed and restarted in %v", time.Since(start).Round(time.Millisecond))
	all := approvals(t, second.Admin, "all")
	if len(all) != 1 || all[0].ID != before.ID || all[0].State != "pending" {
		t.Fatalf("after the restart the requests are %+v, want only %s, pending", all, before.ID)
	}
	after := fetchApproval(t, second.Admin, before.ID)
	if !after.ExpiresAt.Equal(before.ExpiresAt) || after.ArgumentsHash != before.ArgumentsHash || jsonCompactString(after.Arguments) != jsonCompactString(before.Arguments) {
		t.Errorf("after the restart: expires_at %v, hash %s, arguments %s; before: %v, %s, %s (want them unchanged)",
			after.ExpiresAt, after.ArgumentsHash, after.Arguments, before.ExpiresAt, before.ArgumentsHash, before.Arguments)
	}

	cs2 := second.connect(t, nil, nil)
	ch2 := callAsync(t.Context(), cs2, toolCall("t__echo_raw", args))
	second.waitLog(t, "identical call took over an abandoned request", before.ID)
	if all := approvals(t, second.Admin, "all"); len(all) != 1 {
		t.Fatalf("the identical re-send made another request: %+v", all)
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q before the approval", got)
	}
	mustCLI(t, second.Admin, "approve", before.ID)
	if got := mustOK(t, await(t, ch2)); got != args {
		t.Errorf("re-sent call returned %q, want %s", got, args)
	}
	elapsed(t, "kill -9, restart, re-send attaches, approve", start)
	if got, want := readRecord(t, record), []string{"echo_raw " + args}; !slices.Equal(got, want) {
		t.Errorf("upstream record = %q, want %q", got, want)
	}
	if a := fetchApproval(t, second.Admin, before.ID); a.State != "consumed" || a.DispatchOutcome != "ok" {
		t.Errorf("approval %s: state %s, outcome %q; want consumed, ok", before.ID, a.State, a.DispatchOutcome)
	}
}

// TestDroppedClientProcess runs the agent as a separate process (testclient)
// and kills it (SIGKILL) while its call is held. The approval that follows
// runs nothing; the identical re-send from a new client process takes the
// request over and runs it exactly once.
func TestDroppedClientProcess(t *testing.T) {
	g, record := startUpstreamGateway(t, leasePolicy)
	const args = `{"path":"/srv/report.pdf"}`

	c1 := startClient(t, g, agentToken, "t__echo_raw", args)
	p := awaitPendingArgs(t, g.Admin, args)
	start := time.Now()
	if err := c1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c1.done
	var ee *exec.ExitError
	if !errors.As(c1.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the client exited with %v (stdout %q) before it was killed", c1.err, c1.stdout)
	}
	g.waitLog(t, "caller gone while held", p.ID)

	mustCLI(t, g.Admin, "approve", p.ID)
	if a := fetchApproval(t, g.Admin, p.ID); a.State != "approved" {
		t.Fatalf("approval %s is %s after the approve with no caller, want approved (and unused)", p.ID, a.State)
	}
	if got := readRecord(t, record); len(got) != 0 {
		t.Fatalf("upstream ran %q for a caller that is gone", got)
	}

	c2 := startClient(t, g, agentToken, "t__echo_raw", args)
	if got, want := c2.wait(t), "ok "+args; got != want {
		t.Errorf("the re-sending client printed %q, want %q", got, want)
	}
	elapsed(t, "client killed while held, approve, re-send from a new process", start)
	if got, want := readRecord(t, record), []string{"echo_raw " + args}; !slices.Equal(got, want) {
		t.Errorf("upstream record = %q, want %q", got, want)
	}
	if all := approvals(t, g.Admin, "all"); len(all) != 1 || all[0].State != "consumed" {
		t.Errorf("requests = %+v, want only %s, consumed", all, p.ID)
	}
}
