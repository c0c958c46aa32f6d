package gate

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// A turnCounter is a TCP proxy in front of a Postgres server that counts
// round trips: the times a client connection sends after the server last
// sent to it (one "turn" each; a pipelined batch of statements is one
// turn, a statement per round trip one each). BenchmarkHoldAndApprove
// reports them per approval (round-trips/approval).
type turnCounter struct {
	ln    net.Listener
	to    string
	turns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// countTurns starts a turnCounter in front of dsn's server and returns the
// DSN that goes through it; it stops when b ends.
func countTurns(b *testing.B, dsn string) (*turnCounter, string) {
	b.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	tc := &turnCounter{ln: ln, to: u.Host}
	tc.wg.Go(tc.accept)
	b.Cleanup(tc.close)
	u.Host = ln.Addr().String()
	return tc, u.String()
}

func (tc *turnCounter) accept() {
	for {
		c, err := tc.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", tc.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		tc.mu.Lock()
		tc.conns = append(tc.conns, c, s)
		tc.mu.Unlock()
		var serverSpoke atomic.Bool
		serverSpoke.Store(true)
		tc.wg.Go(func() { // server to client
			defer func() { _ = c.Close() }()
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 {
					serverSpoke.Store(true)
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
		tc.wg.Go(func() { // client to server
			defer func() { _ = s.Close() }()
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if serverSpoke.Swap(false) {
						tc.turns.Add(1)
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					_, _ = io.Copy(io.Discard, c)
					return
				}
			}
		})
	}
}

func (tc *turnCounter) close() {
	_ = tc.ln.Close()
	tc.mu.Lock()
	for _, c := range tc.conns {
		_ = c.Close()
	}
	tc.mu.Unlock()
	tc.wg.Wait()
}
