package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStdioAgentStopsReading runs `toolgate serve --stdio` as a child whose
// stdout the test never reads, and sends it requests until their answers
// fill the pipe: with limits.stdio_write_timeout 1s the gateway ends the
// session, logs that the agent stopped reading, and exits with status 1
// (the test only checks that it exits before waitFor). On the base the
// writes to stdout blocked for good and the process never ended by
// itself (the key is unknown there: without it, it hangs).
func TestStdioAgentStopsReading(t *testing.T) {
	dir := t.TempDir()
	cfg := `
storage:
  driver: sqlite
  path: ` + q(filepath.Join(dir, "db.sqlite")) + `
limits:
  stdio_write_timeout: 1s
` + principalsYAML + upstreamServer(filepath.Join(dir, "record.log")) + `
policy:
  default: allow
`
	cmd, stderr, _ := gatewayCommand(t, cfg, nil, "--stdio")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// A pipe nobody reads: the test holds its read end open and never
	// reads it.
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = stdout
	child := startStdioChild(t, cmd, stderr, nil)
	// Requests are written by a goroutine: once the gateway stops reading
	// (its session ended), the writes to its stdin fail or block; the
	// cleanup's stop ends them.
	go floodToolsList(stdin, 2000)
	select {
	case <-child.exited:
	case <-time.After(waitFor(t)):
		t.Fatalf("toolgate serve --stdio did not end within %v with an agent that does not read\nstderr:\n%s", waitFor(t), stderr)
	}
	if !strings.Contains(stderr.String(), "the agent stopped reading its stdin") {
		t.Errorf("no log line says the agent stopped reading\nstderr:\n%s", stderr)
	}
	var xe *exec.ExitError
	if !errors.As(child.waitErr, &xe) || xe.ExitCode() != 1 {
		t.Errorf("toolgate serve --stdio exited with %v, want status 1", child.waitErr)
	}
}
