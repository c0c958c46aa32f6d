//go:build !unix

package gateway

import (
	"io"
	"os"
)

// StdioOutput returns the writer for ServeStdio's out when f is serve's
// stdout (others: files that must not be changed with it, see the unix
// build), and done, to call once ServeStdio returned. Here (no unix file
// flags) the writer is f itself, never closed, and done does nothing; each
// write to the agent runs in a goroutine of its own, bounded by
// limits.stdio_write_timeout (lockedWriter). The unix build's StdioOutput
// gives a pipe or socket a write deadline instead.
func StdioOutput(f *os.File, _ ...*os.File) (w io.WriteCloser, done func()) {
	return keepOpen{f}, func() {}
}
