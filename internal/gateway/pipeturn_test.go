package gateway

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// holdTurn keeps the read turn with the raw calls of u's session once one
// has taken it: the SDK's reader takes it back only when the SDK sends a
// request (the idle grace is an hour).
func holdTurn(t *testing.T, u *upstream) *upConn {
	t.Helper()
	c, err := u.session()
	if err != nil {
		t.Fatal(err)
	}
	tr := c.raw.turn
	if tr == nil || tr.dl == nil {
		t.Fatal("the stdio session has no read turn with read deadlines")
	}
	c.raw.mu.Lock()
	tr.grace = time.Hour
	c.raw.mu.Unlock()
	return c
}

// quietOptions are a gateway's options without health pings, so that
// nothing but the test's calls makes the upstream write.
func quietOptions() *Options { return &Options{HealthInterval: time.Hour} }

// With one call at a time, each call after the first reads its own answer
// from the pipe: the SDK's reader does not take the turn back between them
// and no goroutine hands the answer over.
func TestRawCallerReadsItsOwnAnswer(t *testing.T) {
	_, u, _ := rawTestGateway(t, quietOptions())
	c := holdTurn(t, u)
	const calls = 20
	for i := range calls {
		args := `{"n":` + strings.Repeat("1", i+1) + `}`
		res, err := rawCall(t, t.Context(), u, "echo", args)
		if err != nil || resultText(t, res) != args {
			t.Fatalf("call %d: %s, %v", i, res, err)
		}
	}
	// The first answer is read by the SDK's reader, which held the turn
	// since the session started.
	if got := c.raw.turn.ownReads.Load(); got < calls-1 {
		t.Errorf("%d of %d answers were read by their own call, want at least %d", got, calls, calls-1)
	}
}

// A call that holds the read turn and is cancelled while blocked in its
// read returns at once and passes the turn to the next call, which gets
// its answer; the cancelled call's late answer is dropped.
func TestRawLeaderCancelledPassesTheTurn(t *testing.T) {
	_, u, logs := rawTestGateway(t, quietOptions())
	c := holdTurn(t, u)
	if _, err := rawCall(t, t.Context(), u, "echo", `{"warm":1}`); err != nil {
		t.Fatal(err)
	}
	first := c.raw.count() + 1
	ctx, cancel := context.WithCancel(t.Context())
	a := goRawCall(t, ctx, u, "gate", `{"marker":"lead"}`)
	logs.waitFor(t, "holding lead")
	b := goRawCall(t, t.Context(), u, "gate", `{"marker":"next"}`)
	logs.waitFor(t, "holding next")
	c.raw.mu.Lock()
	leader, held := c.raw.turn.leader, c.raw.turn.held
	c.raw.mu.Unlock()
	if !held || leader != first {
		t.Fatalf("turn held %v by raw call %d, want held by the first call (%d)", held, leader, first)
	}
	cancel()
	r := await(t, a, "the cancelled leader")
	var f *callFailure
	if !errors.As(r.err, &f) || f.outcome != approval.OutcomeCancelledAfterDispatch {
		t.Fatalf("cancelled leader: %v, want a cancelled-after-dispatch failure", r.err)
	}
	logs.waitFor(t, "nobody waits for") // its late answer, read by the next holder
	if _, err := rawCall(t, t.Context(), u, "open", `{"marker":"next"}`); err != nil {
		t.Fatal(err)
	}
	if r := await(t, b, "the call after the leader"); r.err != nil || resultText(t, r.res) != "released next" {
		t.Fatalf("call after the leader: %s, %v", r.res, r.err)
	}
}

// A read deadline that passes in the middle of a line keeps what was read:
// the next call of next returns the whole line, once, with the id of an
// oversized line still scanned across the interruption.
func TestLineReaderResumesAfterDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
	}{{"kept", 1 << 10}, {"over", 16}} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pr.Close(); _ = pw.Close() })
			got := make(chan struct{}, 16)
			lr := newLineReader(bufio.NewReader(notifyReader{pr, got}), tc.max)
			line := `{"jsonrpc":"2.0","id":"tg-7","result":{"content":[]}}`
			half := len(line) / 2
			if _, err := pw.WriteString(line[:half]); err != nil {
				t.Fatal(err)
			}
			type res struct {
				l   jsonLine
				err error
			}
			done := make(chan res, 1)
			go func() {
				l, err := lr.next()
				done <- res{l, err}
			}()
			<-got // the first half was read; next waits for the rest
			if err := pr.SetReadDeadline(time.Unix(1, 0)); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if !isDeadline(r.err) || r.l.size != 0 || r.l.data != nil {
				t.Fatalf("interrupted next: %+v, %v; want no line and os.ErrDeadlineExceeded", r.l, r.err)
			}
			if err := pr.SetReadDeadline(time.Time{}); err != nil {
				t.Fatal(err)
			}
			if _, err := pw.WriteString(line[half:] + "\n{}\n"); err != nil {
				t.Fatal(err)
			}
			l, err := lr.next()
			if err != nil || l.size != int64(len(line)) {
				t.Fatalf("resumed next: size %d, %v; want %d", l.size, err, len(line))
			}
			if tc.max >= len(line) && string(l.data) != line {
				t.Errorf("resumed line %q, want %q", l.data, line)
			}
			if tc.max < len(line) && (!l.over || string(l.scan.id) != `"tg-7"`) {
				t.Errorf("oversized line: over %v, id %s; want over with id \"tg-7\"", l.over, l.scan.id)
			}
			if l, err := lr.next(); err != nil || string(l.data) != "{}" {
				t.Errorf("the line after: %q, %v", l.data, err)
			}
		})
	}
}

// notifyReader reports each read that returned bytes.
type notifyReader struct {
	r   *os.File
	got chan<- struct{}
}

func (n notifyReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if k > 0 {
		n.got <- struct{}{}
	}
	return k, err
}
