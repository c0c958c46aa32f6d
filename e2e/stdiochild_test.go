package e2e

import (
	"fmt"
	"io"
	"os/exec"
	"testing"
)

// A stdioChild is a `toolgate serve --stdio` process started by
// startStdioChild.
type stdioChild struct {
	exited  chan struct{} // closed once the process was waited for
	waitErr error         // cmd.Wait's; read only after exited is closed
}

// startStdioChild starts cmd (from gatewayCommand, its pipes set up) and
// waits for it on a goroutine. The test's cleanup runs before (nil: none),
// stops the process and checks its log (stderr).
func startStdioChild(t *testing.T, cmd *exec.Cmd, stderr *syncBuffer, before func()) *stdioChild {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &stdioChild{exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		if before != nil {
			before()
		}
		stopProcess(t, cmd.Process, c.exited)
		checkChildLog(t, "toolgate serve --stdio", stderr)
	})
	return c
}

// floodToolsList writes an initialize, its notifications/initialized and
// then n tools/list requests to stdin, far more answers than an unread
// pipe holds; it returns at the first write that fails (the process
// ended). Run it on a goroutine: the writes block once the gateway stops
// reading.
func floodToolsList(stdin io.Writer, n int) {
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stall","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return
	}
	for i := 1; i <= n; i++ {
		if _, err := fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i); err != nil {
			return
		}
	}
}
