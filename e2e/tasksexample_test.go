package e2e

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// tasksExampleBin builds examples/tasksclient once, next to the other
// binaries.
var tasksExampleBin = sync.OnceValues(func() (string, error) {
	out := filepath.Join(filepath.Dir(bins.toolgate), "tasksclient")
	return out, goBuild(out, "toolgate/examples/tasksclient")
})

// TestTasksClientExample runs examples/tasksclient, the README's Tasks
// client, against the quickstart policy in front of the real npm filesystem
// server: its write is answered with a task, the program prints the task's
// statusMessage while the call is held, and once the approval goes through
// the CLI it prints the tool's result and exits 0; the file is written once.
func TestTasksClientExample(t *testing.T) {
	n := findNPM(t)
	sandbox, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, fsConfig(t, n, sandbox, "5m"), nil)
	bin, err := tasksExampleBin()
	if err != nil {
		t.Fatalf("build examples/tasksclient: %v", err)
	}
	const content = "written by a task\n"
	cmd := exec.Command(bin, "-url", g.MCP, "-tool", "fs__write_file",
		"-args", `{"path":"task.txt","content":"written by a task\n"}`)
	cmd.Env = append(childEnv(), "TOOLGATE_AGENT_TOKEN="+agentToken)
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tasksclient: %v", err)
	}
	lines := make(chan string)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait() // after the last read, as StdoutPipe requires
	}()
	var printed []string
	// next returns the program's next line of output; false once it has
	// closed its output.
	next := func() (string, bool) {
		t.Helper()
		select {
		case l, ok := <-lines:
			if ok {
				printed = append(printed, l)
			}
			return l, ok
		case <-time.After(waitFor(t)):
			t.Fatalf("tasksclient printed nothing more within %v; so far:\n%s\nstderr:\n%s", waitFor(t), strings.Join(printed, "\n"), stderr)
			return "", false
		}
	}
	waited := false
	t.Cleanup(func() {
		if waited {
			return
		}
		_ = cmd.Process.Kill()
		for range lines {
		}
		if err := <-exited; err != nil {
			t.Logf("tasksclient, killed at cleanup: %v", err)
		}
	})

	var status string
	for status == "" {
		l, ok := next()
		if !ok {
			t.Fatalf("tasksclient ended without a status; it printed:\n%s\nstderr:\n%s", strings.Join(printed, "\n"), stderr)
		}
		if s, ok := strings.CutPrefix(l, "status: "); ok {
			status = s
		}
	}
	p := waitPending(t, g.Admin, 1)[0]
	if !strings.HasPrefix(status, "awaiting approval "+p.ID+": 0 of 1 approvals; expires ") {
		t.Errorf("first status %q, want the held approval %s awaiting its reviewer", status, p.ID)
	}
	if !strings.HasPrefix(printed[0], "task tgt_") || !strings.HasSuffix(printed[0], ": working") {
		t.Errorf("first line %q, want the task id and working", printed[0])
	}
	mustNotExist(t, filepath.Join(sandbox, "task.txt"))

	// A call held as an MCP task runs once approved whether or not the
	// agent still waits: show and approve (the CLI, a separate process)
	// say so rather than "runs only if its caller is still waiting"
	// (polish18), from the API's held_as.
	var raw map[string]any
	adminGet(t, g.Admin+"/v1/approvals/"+p.ID, &raw)
	if raw["held_as"] != "task" {
		t.Errorf("GET approval: held_as %v, want task", raw["held_as"])
	}
	if out := mustCLI(t, g.Admin, "show", p.ID); !strings.Contains(out, "hold (an MCP task: once approved it runs whether or not the agent is still connected)") {
		t.Errorf("show printed %q, want the mode to say it is an MCP task", out)
	}
	// The inbox's detail view says so too (polish19).
	b := newBrowser(t)
	b.signIn(g.Admin, approverToken)
	b.open(g.Admin, "/ui/approvals/"+p.ID)
	if got := b.text(css(`#detail [data-held-as="task"]`)); !strings.Contains(got, "Held as an MCP task: once approved it runs whether or not the agent is still connected") {
		t.Errorf("the inbox's detail view says %q, want that the task runs whether or not the agent is still connected", got)
	}
	approved := mustCLI(t, g.Admin, "approve", p.ID)
	if !strings.Contains(approved, "held as an MCP task, the call runs when its holder re-checks it against the policy in force and its approval quorum, whether or not the agent is still connected") || strings.Contains(approved, "still waiting") {
		t.Errorf("approve printed %q, want that the task runs whether or not the agent is still connected", approved)
	}
	for _, ok := next(); ok; _, ok = next() {
	}
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Fatalf("tasksclient: %v; it printed:\n%s\nstderr:\n%s", err, strings.Join(printed, "\n"), stderr)
		}
	case <-time.After(waitFor(t)):
		t.Fatalf("tasksclient did not exit within %v", waitFor(t))
	}
	out := strings.Join(printed, "\n")
	for _, want := range []string{
		"status: approval " + p.ID + ": the call ran",
		"result: Successfully wrote to task.txt",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tasksclient printed:\n%s\nwant a line %q", out, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(sandbox, "task.txt")); err != nil || string(b) != content {
		t.Errorf("task.txt: %q, %v; want %q", b, err, content)
	}
	if st := showJSON(t, g.Admin, p.ID); st.State != "consumed" || st.DispatchOutcome != "ok" {
		t.Errorf("approval after the task: state %s, outcome %s; want consumed, ok", st.State, st.DispatchOutcome)
	}
}

// TestTasksClientSaysAnHTTP400sError runs examples/tasksclient against a
// real toolgate for a tool that does not exist, which toolgate answers
// with HTTP 400 and a JSON-RPC error (invalid params): the program exits 1
// saying the error's message and code as a person reads them, not the raw
// JSON-RPC body (ends40: before, it printed `HTTP 400 Bad Request:
// {"jsonrpc":"2.0",…}`).
func TestTasksClientSaysAnHTTP400sError(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "db.sqlite"), upstreamServer(filepath.Join(dir, "record.log"))+"\npolicy:\n  default: allow\n"), nil)
	bin, err := tasksExampleBin()
	if err != nil {
		t.Fatalf("build examples/tasksclient: %v", err)
	}
	cmd := exec.Command(bin, "-url", g.MCP, "-tool", "t__no_such_tool", "-args", `{}`)
	cmd.Env = append(childEnv(), "TOOLGATE_AGENT_TOKEN="+agentToken)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var xe *exec.ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != 1 {
		t.Errorf("tasksclient exited with %v, want status 1\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stderr.String()
	t.Logf("tasksclient: %s", strings.TrimSpace(out))
	for _, want := range []string{"tasksclient: tools/call: ", "t__no_such_tool", "JSON-RPC error -32602", "HTTP 400 Bad Request"} {
		if !strings.Contains(out, want) {
			t.Errorf("tasksclient's stderr %q does not say %q", out, want)
		}
	}
	if strings.Contains(out, `"jsonrpc"`) || strings.Contains(out, "{") {
		t.Errorf("tasksclient's stderr quotes the raw JSON-RPC body: %q", out)
	}
}
