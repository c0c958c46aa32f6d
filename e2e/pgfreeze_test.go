package e2e

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// A pgFreeze is a TCP proxy in front of Postgres that, once frozen, stops
// relaying in both directions while keeping every connection open: a
// server that stopped answering (a stalled host, a black-holed network),
// not one that went away. New connections are accepted and left silent.
type pgFreeze struct {
	ln       net.Listener
	upstream string
	frozen   chan struct{} // closed by freeze
	once     sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn // closed when the test ends
	stopped  bool       // the test ended
}

// startPGFreeze starts a pgFreeze in front of the server of dsn (a URL)
// and returns it with dsn pointing at the proxy. It stops when the test
// ends.
func startPGFreeze(t *testing.T, dsn string) (*pgFreeze, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("pgFreeze needs a postgres:// DSN with a host, got %q (%v)", dsn, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgFreeze{ln: ln, upstream: u.Host, frozen: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.conns, p.stopped = nil, true
		p.mu.Unlock()
		p.wg.Wait()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

// freeze stops all relaying from now on.
func (p *pgFreeze) freeze() { p.once.Do(func() { close(p.frozen) }) }

// track records c for closing at the end, or closes it and reports false
// when the proxy has stopped.
func (p *pgFreeze) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *pgFreeze) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c) || !p.track(s) {
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.wg.Go(func() { p.relay(s, c) })
		p.wg.Go(func() { p.relay(c, s) })
	}
}

// relay copies from src to dst until either fails; once frozen it copies
// nothing more (what it read is dropped) and keeps reading, so neither
// side sees the connection end.
func (p *pgFreeze) relay(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
		default:
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
