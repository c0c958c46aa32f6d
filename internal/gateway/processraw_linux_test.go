//go:build linux

package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"toolgate/internal/rawio"
)

// A stdio upstream's pipes are written and read through rawio (no
// scheduler bookkeeping per line: docs/performance.md, "cpu25"), and the
// process still ends as before: its stdout at EOF once it exited.
func TestProcessPipesRaw(t *testing.T) {
	p, err := startProcess(ServerConfig{Name: "cat", Command: "cat"}, io.Discard, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, ok := p.in.(*rawio.File); !ok {
		t.Errorf("stdin is written through %T, want *rawio.File", p.in)
	}
	if _, ok := p.out.(*rawio.File); !ok {
		t.Errorf("stdout is read through %T, want *rawio.File", p.out)
	}
	if _, err := p.Write([]byte("{\"jsonrpc\":\"2.0\"}\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(p.out)
	line, err := br.ReadString('\n')
	if err != nil || line != "{\"jsonrpc\":\"2.0\"}\n" {
		t.Fatalf("read back %q, %v", line, err)
	}
	// cat exits at the end of its input; stdout then ends (EOF), or is
	// closed by the Wait that reaped it first (as an *os.File's is).
	_ = p.stdin.Close()
	if _, err := br.ReadByte(); err != io.EOF && !errors.Is(err, os.ErrClosed) { //nolint:errorlint // io.EOF itself, as os.File gives it
		t.Fatalf("stdout after the process ended: %v, want io.EOF or os.ErrClosed", err)
	}
}

// An HTTP upstream's connections are read and written through rawio too,
// and keep their descriptor (the peek and the write-then-wait use it).
func TestH1DialRaw(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h1 := newH1Transport(http.DefaultTransport, nil, "http://"+ln.Addr().String()+"/mcp", 2)
	lc, _, err := h1.dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lc.close()
	if _, ok := lc.c.(*rawio.Conn); !ok {
		t.Errorf("the upstream connection is %T, want *rawio.Conn", lc.c)
	}
	if lc.rc == nil {
		t.Error("the upstream connection lost its descriptor (RawConn)")
	}
	if st := lc.peek(); st != h1Quiet {
		t.Errorf("peek of a quiet open connection = %v, want h1Quiet", st)
	}
}
