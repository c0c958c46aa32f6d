package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A pgCut is a TCP proxy in front of Postgres that, once armed, lets the
// next COMMIT of a transaction that set a request's state to 'consumed'
// reach the server, waits until the server answered it (committed), and
// then closes the client's connection without relaying that answer: the
// client sees its connection terminated and cannot tell that the
// transaction committed (an ambiguous commit). Everything else is relayed
// byte for byte. It reads the client's side of the protocol (v3: Parse,
// Bind, Query) to follow prepared statements, so it recognises the
// pipelined COMMIT of pgx batches as well as a simple-query one.
type pgCut struct {
	ln       net.Listener
	upstream string
	armed    atomic.Bool
	ledger   atomic.Bool    // cut a ledger write's commit (armLedger), not a consume's
	cuts     chan cutResult // one per cut commit
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{} // open, closed when the test ends
}

// cutResult reports one cut: whether the server's answer said COMMIT (it
// committed) rather than ROLLBACK.
type cutResult struct{ committed bool }

// startPGCut starts a pgCut in front of the server of dsn (a URL) and
// returns it with dsn pointing at the proxy. It stops when the test ends.
func startPGCut(t *testing.T, dsn string) (*pgCut, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("pgCut needs a postgres:// DSN with a host, got %q (%v)", dsn, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgCut{ln: ln, upstream: u.Host, cuts: make(chan cutResult, 16), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil
		p.mu.Unlock()
		p.wg.Wait()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

// arm makes the next commit of a consume the one that is cut.
func (p *pgCut) arm() { p.ledger.Store(false); p.armed.Store(true) }

// armLedger makes the next commit of a transaction that writes a result
// to the ledger (approval_results: a dispatch's outcome with its result)
// the one that is cut: a transaction's COMMIT, or the answer of the one
// statement that RecordOutcome sends on Postgres (it commits on its own).
func (p *pgCut) armLedger() { p.ledger.Store(true); p.armed.Store(true) }

func (p *pgCut) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *pgCut) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		pc := &pgCutConn{p: p, client: client, server: server}
		p.wg.Go(pc.toServer)
		p.wg.Go(pc.toClient)
	}
}

// pgCutConn is one proxied connection.
type pgCutConn struct {
	p              *pgCut
	client, server net.Conn
	stmts          map[string]string // prepared statement name → query, as Parse named them
	consumes       bool              // the open transaction set a request's state to 'consumed'
	results        bool              // the open transaction wrote to approval_results

	mu     sync.Mutex
	muted  bool   // the server's answers are dropped, not relayed (guarded by mu)
	tail   []byte // the end of what was dropped, to find the answer's end across reads
	tagged bool   // the dropped answer contained CommandComplete "COMMIT"
	single bool   // the cut is of one statement committing on its own: "SELECT 1" tags its commit
}

func (c *pgCutConn) close() {
	_ = c.client.Close()
	_ = c.server.Close()
}

// toServer relays the client's messages, reading them to follow prepared
// statements and transactions.
func (c *pgCutConn) toServer() {
	defer c.close()
	c.stmts = map[string]string{}
	// Untyped startup messages (SSLRequest, StartupMessage…) until the
	// StartupMessage of protocol 3.0.
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c.client, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:4]))
		if n < 8 {
			return
		}
		body := make([]byte, n-8)
		if _, err := io.ReadFull(c.client, body); err != nil {
			return
		}
		if _, err := c.server.Write(append(hdr[:], body...)); err != nil {
			return
		}
		if binary.BigEndian.Uint32(hdr[4:]) == 196608 {
			break
		}
	}
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(c.client, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[1:]))
		if n < 4 {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(c.client, body); err != nil {
			return
		}
		if c.commitToCut(hdr[0], body) {
			c.mu.Lock()
			c.muted = true
			c.mu.Unlock()
		}
		if _, err := c.server.Write(append(hdr[:], body...)); err != nil {
			return
		}
	}
}

// commitToCut follows one client message and reports whether it is the
// commit to cut (the proxy armed, the transaction a consume's).
func (c *pgCutConn) commitToCut(typ byte, body []byte) bool {
	var query string
	switch typ {
	case 'P': // Parse: name, query, …
		name, rest, _ := bytes.Cut(body, []byte{0})
		q, _, _ := bytes.Cut(rest, []byte{0})
		c.stmts[string(name)] = string(q)
		return false
	case 'B': // Bind: portal, statement, formats, parameters, …
		_, rest, _ := bytes.Cut(body, []byte{0})
		name, rest, _ := bytes.Cut(rest, []byte{0})
		query = c.stmts[string(name)]
		if strings.Contains(query, "UPDATE requests SET state = $1") && firstParam(rest) == "consumed" {
			c.consumes = true
			return false
		}
		if strings.Contains(query, "INSERT INTO approval_results") {
			if strings.HasPrefix(strings.TrimSpace(query), "WITH upd AS") {
				// RecordOutcome's one statement on Postgres (no BEGIN or
				// COMMIT: it commits on its own): cut its answer.
				cut := c.p.ledger.Load() && c.p.armed.CompareAndSwap(true, false)
				if cut {
					c.mu.Lock()
					c.single = true
					c.mu.Unlock()
				}
				return cut
			}
			c.results = true
			return false
		}
	case 'Q': // Query: the query
		q, _, _ := bytes.Cut(body, []byte{0})
		query = string(q)
	default:
		return false
	}
	switch strings.ToUpper(strings.TrimSpace(query)) {
	case "COMMIT":
		mine := c.consumes
		if c.p.ledger.Load() {
			mine = c.results
		}
		cut := mine && c.p.armed.CompareAndSwap(true, false)
		c.consumes, c.results = false, false
		return cut
	case "ROLLBACK", "BEGIN":
		c.consumes, c.results = false, false
	}
	if strings.Contains(query, "INSERT INTO approval_results") {
		c.results = true
	}
	return false
}

// firstParam returns the first parameter of a Bind message's rest (after
// the portal and statement names) as text, or "" when there is none.
func firstParam(rest []byte) string {
	if len(rest) < 2 {
		return ""
	}
	nf := int(binary.BigEndian.Uint16(rest))
	rest = rest[2+2*nf:]
	if len(rest) < 2 || binary.BigEndian.Uint16(rest) == 0 {
		return ""
	}
	rest = rest[2:]
	if len(rest) < 4 {
		return ""
	}
	n := binary.BigEndian.Uint32(rest) // 0xFFFFFFFF: NULL
	if n == 0xFFFFFFFF || uint64(len(rest)) < 4+uint64(n) {
		return ""
	}
	return string(rest[4 : 4+n])
}

// readyIdle is ReadyForQuery with status idle: the server's answer to a
// COMMIT's Sync (or simple query) has ended.
var readyIdle = []byte{'Z', 0, 0, 0, 5, 'I'}

// toClient relays the server's bytes; once muted it drops them until the
// server's answer ended (readyIdle), then closes both connections and
// reports the cut.
func (c *pgCutConn) toClient() {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			c.mu.Lock()
			muted := c.muted
			var done bool
			if muted {
				seen := append(c.tail, buf[:n]...)
				c.tagged = c.tagged || bytes.Contains(seen, []byte("COMMIT\x00")) ||
					(c.single && bytes.Contains(seen, []byte("SELECT 1\x00")))
				done = bytes.Contains(seen, readyIdle)
				c.tail = append([]byte(nil), seen[max(0, len(seen)-8):]...)
			}
			c.mu.Unlock()
			if done {
				c.p.cuts <- cutResult{committed: c.tagged}
				return
			}
			if !muted {
				if _, werr := c.client.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if muted := c.isMuted(); muted && !errors.Is(err, net.ErrClosed) {
				c.p.cuts <- cutResult{}
			}
			return
		}
	}
}

func (c *pgCutConn) isMuted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.muted
}
