package gateway

import (
	"bufio"
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// leadOf returns the stdout lead of u's shared raw session, with the
// linger set to d (an hour: the SDK's reader never takes the stdout back
// between the test's calls, so who reads is deterministic).
func leadOf(t *testing.T, u *upstream, d time.Duration) *stdoutLead {
	t.Helper()
	c, err := u.session()
	if err != nil {
		t.Fatal(err)
	}
	if c.raw == nil || c.raw.lead == nil {
		t.Fatal("the stdio session has no stdout lead (its pipe has no read deadlines?)")
	}
	c.raw.mu.Lock()
	c.raw.linger = d
	c.raw.mu.Unlock()
	return c.raw.lead
}

// quietRaw are the options of the stdout lead tests: no health pings, so
// the child writes only what the test's calls make it write (a ping's
// answer would wake a read the test expects to be woken otherwise).
func quietRaw() *Options { return &Options{HealthInterval: time.Hour} }

// TestLineReaderKeepsALineCutByADeadline: a read deadline that passes in
// the middle of a line returns no line; the next read continues the line
// and returns it whole.
func TestLineReaderKeepsALineCutByADeadline(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pr.Close(); _ = pw.Close() }()
	lr := newLineReader(bufio.NewReaderSize(pr, 16), 1<<10) // 16: the half line fills the buffer
	if _, err := pw.WriteString(`{"jsonrpc":"2.0","id":"tg-1",`); err != nil {
		t.Fatal(err)
	}
	// The deadline passes only once the half line has been read: a read
	// returns what is there first, so the reader sees it before it waits.
	if err := pr.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	l, err := lr.next()
	if !errors.Is(err, os.ErrDeadlineExceeded) || l.data != nil || l.size != 0 {
		t.Fatalf("next at the deadline = %q (size %d), %v; want no line and the deadline's error", l.data, l.size, err)
	}
	if err := pr.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.WriteString(`"result":{}}` + "\n" + `{"second":true}` + "\n"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"jsonrpc":"2.0","id":"tg-1","result":{}}`, `{"second":true}`} {
		l, err := lr.next()
		if err != nil || string(l.data) != want || l.size != int64(len(want)) {
			t.Fatalf("next = %q (size %d), %v; want %q", l.data, l.size, err, want)
		}
	}
}

// TestRawCallReadsItsOwnAnswer: one call at a time, each raw call reads
// its own answer from the child's stdout (no hand-off from the SDK's
// reader): every line of these calls is read by a leading call.
func TestRawCallReadsItsOwnAnswer(t *testing.T) {
	_, u, _ := rawTestGateway(t, quietRaw())
	lead := leadOf(t, u, time.Hour)
	if _, err := rawCall(t, t.Context(), u, "echo", `{"message":"warm"}`); err != nil {
		t.Fatal(err) // the SDK's reader may read this one; then it stands down
	}
	before := lead.led.Load()
	const calls = 20
	for i := range calls {
		res, err := rawCall(t, t.Context(), u, "echo", `{"message":"hi"}`)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := resultText(t, res); got != `{"message":"hi"}` {
			t.Fatalf("call %d: %q", i, got)
		}
	}
	if n := lead.led.Load() - before; n < calls {
		t.Fatalf("%d of the %d answers were read by their own call", n, calls)
	}
}

// TestRawLeaderCancelled: a call that reads the child's stdout while it
// waits returns as soon as its context ends (the read is woken), sends
// notifications/cancelled, and the next call reads past the late answer
// to its own.
func TestRawLeaderCancelled(t *testing.T) {
	_, u, logs := rawTestGateway(t, quietRaw())
	lead := leadOf(t, u, time.Hour)
	if _, err := rawCall(t, t.Context(), u, "echo", `{"message":"warm"}`); err != nil {
		t.Fatal(err)
	}
	before := lead.led.Load()
	ctx, cancel := context.WithCancel(t.Context())
	call := goRawCall(t, ctx, u, "gate", `{"marker":"c1"}`)
	logs.waitFor(t, "holding c1")
	if lead.led.Load() == before {
		t.Fatal("the gated call does not read the stdout itself")
	}
	cancel()
	if r := await(t, call, "the cancelled call"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled call: %s, %v", r.res, r.err)
	}
	res, err := rawCall(t, t.Context(), u, "echo", `{"message":"next"}`)
	if err != nil || resultText(t, res) != `{"message":"next"}` {
		t.Fatalf("next call: %s %v", res, err)
	}
	logs.waitFor(t, "cancelled ") // the child saw notifications/cancelled
}

// TestRawLeaderHandsOverToTheSDKReader: a leading call that gets its
// answer while another call still waits for one wakes the SDK's reader,
// which reads the other call's answer (nobody else would: the calls that
// wait do not read, and the linger keeps the SDK's reader away otherwise).
func TestRawLeaderHandsOverToTheSDKReader(t *testing.T) {
	_, u, logs := rawTestGateway(t, quietRaw())
	lead := leadOf(t, u, time.Hour)
	if _, err := rawCall(t, t.Context(), u, "echo", `{"message":"warm"}`); err != nil {
		t.Fatal(err)
	}
	before := lead.led.Load()
	a := goRawCall(t, t.Context(), u, "gate", `{"marker":"a"}`)
	logs.waitFor(t, "holding a")
	if lead.led.Load() == before {
		t.Fatal("the first gated call does not read the stdout itself")
	}
	b := goRawCall(t, t.Context(), u, "gate", `{"marker":"b"}`)
	logs.waitFor(t, "holding b")
	// Bounded: without the hand-over nobody would read these answers.
	ctx, cancel := context.WithTimeout(t.Context(), testWait)
	defer cancel()
	if _, err := rawCall(t, ctx, u, "open", `{"marker":"a"}`); err != nil {
		t.Fatal(err)
	}
	if r := await(t, a, "call a"); r.err != nil || resultText(t, r.res) != "released a" {
		t.Fatalf("call a: %s %v", r.res, r.err)
	}
	// a has stopped reading; b waits. Its answer comes after this.
	if _, err := rawCall(t, ctx, u, "open", `{"marker":"b"}`); err != nil {
		t.Fatal(err)
	}
	if r := await(t, b, "call b"); r.err != nil || resultText(t, r.res) != "released b" {
		t.Fatalf("call b: %s %v", r.res, r.err)
	}
}
