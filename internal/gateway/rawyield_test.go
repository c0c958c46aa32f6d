package gateway

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// lineSink is a raw calls' stdin that hands each line written to it to
// the test.
type lineSink chan []byte

func (s lineSink) Write(p []byte) (int, error) {
	s <- bytes.Clone(p)
	return len(p), nil
}

// readRecorder is the child's stdout as the stdout guard reads it: at
// each Read it sends whether the test's call had returned by then.
type readRecorder struct {
	r        io.Reader
	returned *atomic.Bool
	entered  chan bool
}

func (r readRecorder) Read(p []byte) (int, error) {
	r.entered <- r.returned.Load()
	return r.r.Read(p)
}

// TestRawAnswerRunsBeforeTheNextRead: on one P (procs.Follow at one call
// in flight), a raw call that was the only one waiting runs with its
// answer before the stdout guard's reader reads the child's stdout again
// (yieldToAnswered): that read finds nothing and parks, so before, the
// empty read and the park came between the child's answer and the call's
// answer to its agent. Counted over 60 calls, one at a time: the call has
// returned when the reader's next read begins in (nearly) all of them;
// the scheduler's fairness check (a goroutine that yielded goes to the
// global queue, which is served first at every 61st turn) may reverse an
// odd one.
func TestRawAnswerRunsBeforeTheNextRead(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx := t.Context()
	logs := &logBuffer{}
	sink := make(lineSink, 1)
	raw := newRawCalls(sink, 1<<20, logs.logger())
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pw.Close(); _ = pr.Close() })
	var returned atomic.Bool
	rec := readRecorder{r: pr, returned: &returned, entered: make(chan bool, 4)}
	guard := newStdoutGuard(ctx, rec, 1<<20, logs.logger(), raw)
	go func() { _, _ = io.Copy(io.Discard, guard) }() // the SDK's reader: nothing reaches it here
	within := func(what string) {
		t.Helper()
		t.Fatalf("%s did not happen within 10 s", what)
	}
	select {
	case <-rec.entered: // the reader waits in its first read
	case <-time.After(10 * time.Second):
		within("the reader's first read")
	}
	const calls = 60
	first := 0
	for i := range calls {
		returned.Store(false)
		done := make(chan error, 1)
		go func() {
			_, err := raw.call(ctx, "echo", []byte(`{}`), "", nil)
			returned.Store(true)
			done <- err
		}()
		var line []byte
		select {
		case line = <-sink:
		case <-time.After(10 * time.Second):
			within("the call's line")
		}
		id := fmt.Sprintf(`"%s%d"`, rawIDPrefix, i+1)
		if !bytes.Contains(line, []byte(`"id":`+id)) {
			t.Fatalf("call %d wrote %s, want the id %s", i, line, id)
		}
		if _, err := io.WriteString(pw, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[]}}`+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			within("the call's answer")
		}
		select {
		case ret := <-rec.entered: // the reader's read after the answer
			if ret {
				first++
			}
		case <-time.After(10 * time.Second):
			within("the reader's next read")
		}
	}
	if first < calls*3/4 {
		t.Errorf("the answered call had returned before the reader's next read in %d of %d calls, want at least %d: the reader read (and parked) first", first, calls, calls*3/4)
	}
}
