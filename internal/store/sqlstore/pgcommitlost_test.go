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

// commitLoser is a TCP proxy in front of a real Postgres server that, once
// armed, lets the next COMMIT's CommandComplete through and then, in place
// of the ReadyForQuery after it, sends the FATAL a fast shutdown sends
// (57P01) and closes the connection: the transaction committed, and the
// connection died before the pipeline ended.
type commitLoser struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	lost   atomic.Int32 // connections cut after their COMMIT
	wg     sync.WaitGroup
}

func newCommitLoser(t *testing.T, target string) *commitLoser {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitLoser{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

func (p *commitLoser) accept() {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		conns.Go(func() {
			defer func() { _ = c.Close(); _ = s.Close() }()
			conns.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
			p.relay(c, s)
		})
	}
}

// relay copies the server's messages (type byte, int32 length, body: the
// v3 protocol after an unencrypted startup) to the client, cutting the
// connection after a COMMIT when armed.
func (p *commitLoser) relay(client io.Writer, server io.Reader) {
	committed := false
	head := make([]byte, 5)
	for {
		if _, err := io.ReadFull(server, head); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if head[0] == 'Z' && committed && p.armed.CompareAndSwap(true, false) {
			var e bytes.Buffer
			for _, f := range []string{"SFATAL", "VFATAL", "C57P01", "Mterminating connection due to administrator command"} {
				e.WriteString(f)
				e.WriteByte(0)
			}
			e.WriteByte(0)
			msg := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(e.Len()+4)) //nolint:gosec // G115: a few dozen bytes
			_, _ = client.Write(append(msg, e.Bytes()...))
			p.lost.Add(1)
			return
		}
		committed = head[0] == 'C' && bytes.HasPrefix(body, []byte("COMMIT\x00"))
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
	dsn := pgtest.Fresh(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCommitLoser(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	db := openTest(t, postgresConfig(u.String()))
	ctx := t.Context()

	own := store.Cap{Scope: store.CapPrincipal, Key: "desktop", Limit: 8, Name: "own"}
	total := store.Cap{Scope: store.CapTotal, Limit: 100, Name: "total"}
	r := pendingRequest(testID(1))
	r.CreatedAt, r.ExpiresAt = time.Now(), time.Now().Add(time.Hour)
	proxy.armed.Store(true)
	if err := db.CreateRequest(ctx, r, own, total); err != nil {
		t.Errorf("CreateRequest after its COMMIT answered = %v, want nil (it committed)", err)
	}
	if n := proxy.lost.Load(); n != 1 {
		t.Fatalf("connections cut after COMMIT = %d, want 1 (the create's pipeline)", n)
	}
	if got, err := db.GetRequest(ctx, r.ID); err != nil || got.State != approval.StatePending {
		t.Fatalf("GetRequest = %+v, %v; want it pending", got, err)
	}

	proxy.armed.Store(true)
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
