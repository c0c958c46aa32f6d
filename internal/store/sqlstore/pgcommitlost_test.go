package sqlstore

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// Where a commitLoser cuts a connection once armed: at the first COMMIT
// it sees after commitLoser.arm.
type cutAt int32

const (
	// cutBeforeReady lets the COMMIT's CommandComplete through and then,
	// in place of the ReadyForQuery after it, sends the FATAL a fast
	// shutdown sends (57P01) and closes the connection.
	cutBeforeReady cutAt = iota + 1
	// cutBeforeAnswer lets the COMMIT reach the server, which commits,
	// and closes the connection instead of passing on its
	// CommandComplete: the client sees the connection end with no answer.
	cutBeforeAnswer
	// cutBeforeServer closes the connection instead of passing on the
	// client's COMMIT (a simple query) to the server, which then rolls
	// the transaction back: the client sees the same as cutBeforeAnswer.
	cutBeforeServer
	// cutBeforeExecute closes the connection instead of passing on the
	// client's next Execute message (of any statement, not only COMMIT):
	// the server runs nothing of the pipeline or statement it begins.
	cutBeforeExecute
	// cutAfterSync passes on the client's next Sync that ends messages
	// with an Execute among them (a pipeline or statement, not a prepare
	// round) and then closes both sides: the server has the whole request
	// and runs it to its end, commit included, while the client sees the
	// connection end with no answer.
	cutAfterSync
)

// commitLoser is a TCP proxy in front of a real Postgres server that, once
// armed, cuts the connection of the next COMMIT at the point its cutAt
// names; with refuse set it closes every new connection at once (a server
// that cannot be reached).
type commitLoser struct {
	ln     net.Listener
	target string
	armed  atomic.Int32 // a cutAt; 0: disarmed
	refuse atomic.Bool
	// anyStatement makes cutBeforeAnswer and cutBeforeReady cut at the
	// answer of any statement, not only a COMMIT's: a statement that
	// commits on its own (at its Sync, before its answer is sent).
	anyStatement atomic.Bool
	lost         atomic.Int32 // connections cut at a COMMIT
	// madeUpKey replaces the process id of the server's BackendKeyData
	// with one of the proxy's own, as PgBouncer does (it answers cancel
	// requests itself): the client's PgConn.PID names no server process.
	madeUpKey atomic.Bool
	// turns counts the client's round trips: its simple queries (Q) and
	// the Syncs (S) that end its extended-protocol messages.
	turns atomic.Int64
	wg    sync.WaitGroup
}

func newCommitLoser(tb testing.TB, target string) *commitLoser {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &commitLoser{ln: ln, target: target}
	p.wg.Go(p.accept)
	tb.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

// arm makes the proxy cut the connection of the next COMMIT at at.
func (p *commitLoser) arm(at cutAt) { p.armed.Store(int32(at)) }

// fire reports whether the proxy is armed with at, disarming it.
func (p *commitLoser) fire(at cutAt) bool {
	if p.armed.CompareAndSwap(int32(at), 0) {
		p.lost.Add(1)
		return true
	}
	return false
}

func (p *commitLoser) accept() {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		conns.Go(func() {
			defer func() { _ = c.Close(); _ = s.Close() }()
			conns.Go(func() { p.forward(s, c); _ = s.Close() })
			p.relay(c, s)
		})
	}
}

// readMessage reads one v3 protocol message (type byte, int32 length,
// body) into head and returns its body.
func readMessage(r io.Reader, head []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(head[len(head)-4:])-4)
	_, err := io.ReadFull(r, body)
	return body, err
}

// forward copies the client's messages to the server: first the startup
// message (no type byte: an unencrypted startup), then typed messages,
// dropping the connection at a COMMIT when armed with cutBeforeServer.
func (p *commitLoser) forward(server io.Writer, client io.Reader) {
	body, err := readMessage(client, make([]byte, 4))
	if err != nil {
		return
	}
	if _, err := server.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)); err != nil { //nolint:gosec // G115: a startup message
		return
	}
	head := make([]byte, 5)
	executes := false // an Execute since the last Sync
	for {
		body, err := readMessage(client, head)
		if err != nil {
			return
		}
		if head[0] == 'Q' && bytes.HasPrefix(bytes.ToUpper(body), []byte("COMMIT")) && p.fire(cutBeforeServer) {
			return
		}
		if head[0] == 'E' && p.fire(cutBeforeExecute) {
			return
		}
		if head[0] == 'Q' || head[0] == 'S' {
			p.turns.Add(1)
		}
		// Whether to cut after a Sync is settled before it is passed on:
		// once the server has it, its answer may reach the client, which
		// may arm the proxy for its next statement before this goroutine
		// looks, and the cut would hit this earlier request's connection
		// (a lock's holder, in TestSettleBehindAPooler).
		cut := false
		switch head[0] {
		case 'E':
			executes = true
		case 'S':
			cut = executes && p.fire(cutAfterSync)
			executes = false
		}
		if _, err := server.Write(append(head, body...)); err != nil {
			return
		}
		if cut {
			return
		}
	}
}

// relay copies the server's messages to the client, cutting the
// connection at a COMMIT's answer when armed with cutBeforeAnswer or
// cutBeforeReady.
func (p *commitLoser) relay(client io.Writer, server io.Reader) {
	committed := false
	head := make([]byte, 5)
	for {
		body, err := readMessage(server, head)
		if err != nil {
			return
		}
		if head[0] == 'Z' && committed && p.fire(cutBeforeReady) {
			var e bytes.Buffer
			for _, f := range []string{"SFATAL", "VFATAL", "C57P01", "Mterminating connection due to administrator command"} {
				e.WriteString(f)
				e.WriteByte(0)
			}
			e.WriteByte(0)
			msg := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(e.Len()+4)) //nolint:gosec // G115: a few dozen bytes
			_, _ = client.Write(append(msg, e.Bytes()...))
			return
		}
		if head[0] == 'K' && len(body) == 8 && p.madeUpKey.Load() {
			binary.BigEndian.PutUint32(body, madeUpPID)
		}
		committed = head[0] == 'C' && (p.anyStatement.Load() || bytes.HasPrefix(body, []byte("COMMIT\x00")))
		if committed && p.fire(cutBeforeAnswer) {
			return
		}
		if _, err := client.Write(append(head, body...)); err != nil {
			return
		}
	}
}

// TestCommitAnsweredThenConnectionLost: when Postgres answers a pipeline's
// COMMIT and the connection dies before the ReadyForQuery after it (a fast
// shutdown's FATAL arriving in between), the pipelined create and the
// pipelined decision report success: both committed. Before, both reported
// "unavailable": the gate denied a held call whose request stood pending
// for approvers (TestPostgresOutage's flake in CI), and a recorded
// approval was reported failed to its approver.
func TestCommitAnsweredThenConnectionLost(t *testing.T) {
	db, proxy := openThroughCommitLoser(t, 0)
	ctx := t.Context()

	own := store.Cap{Scope: store.CapPrincipal, Key: "desktop", Limit: 8, Name: "own"}
	total := store.Cap{Scope: store.CapTotal, Limit: 100, Name: "total"}
	r := pendingRequest(testID(1))
	r.CreatedAt, r.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeReady)
	if err := db.CreateRequest(ctx, r, own, total); err != nil {
		t.Errorf("CreateRequest after its COMMIT answered = %v, want nil (it committed)", err)
	}
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut after COMMIT = %d, want 1 (the create's pipeline)", n)
	}
	if got, err := db.GetRequest(ctx, r.ID); err != nil || got.State != approval.StatePending {
		t.Fatalf("GetRequest = %+v, %v; want it pending", got, err)
	}

	notesSent(db) // no notification of an earlier write is sent through the armed proxy
	proxy.arm(cutBeforeReady)
	got, err := db.UpdateRequest(ctx, r.ID, "bob", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", time.Now())
	})
	if err != nil || got.State != approval.StateApproved {
		t.Errorf("UpdateRequest after its COMMIT answered = %v, %v; want approved, nil (it committed)", got.State, err)
	}
	if n := proxy.lost.Load(); n != 2 {
		t.Fatalf("connections cut after COMMIT = %d, want 2 (and the decision's pipeline)", n)
	}
	if got, err := db.GetRequest(ctx, r.ID); err != nil || got.State != approval.StateApproved {
		t.Fatalf("GetRequest = %v, %v; want approved", got.State, err)
	}
}

// madeUpPID is the process id a commitLoser with madeUpKey hands its
// clients: above Linux's largest (pid_max is at most 2^22).
const madeUpPID = 1<<30 + 7

// openThroughCommitLoser opens a fresh Postgres database through a
// commitLoser, with at most maxConns connections in the main pool (0: the
// default).
func openThroughCommitLoser(tb testing.TB, maxConns int) (*DB, *commitLoser) {
	tb.Helper()
	return openThroughProxy(tb, maxConns, false)
}

// openThroughProxy is openThroughCommitLoser with the proxy's madeUpKey
// set from the first connection on.
func openThroughProxy(tb testing.TB, maxConns int, madeUpKey bool) (*DB, *commitLoser) {
	tb.Helper()
	u, err := url.Parse(pgtest.Fresh(tb))
	if err != nil {
		tb.Fatal(err)
	}
	proxy := newCommitLoser(tb, u.Host)
	proxy.madeUpKey.Store(madeUpKey)
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	cfg := postgresConfig(u.String())
	cfg.MaxConns = maxConns
	return openTest(tb, cfg), proxy
}
