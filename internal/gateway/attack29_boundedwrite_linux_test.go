package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"
)

// envSlowCat, in the test binary's environment, makes it a child that
// copies its stdin to its stdout 4 KiB at a time with a pause after each
// (runSlowCat): a reader slow enough that bounded writes end at their
// bound partly sent, then finished by the process's goroutine.
const envSlowCat = "TOOLGATE_GATEWAY_TEST_SLOWCAT"

func init() {
	if os.Getenv(envSlowCat) == "" {
		return
	}
	buf := make([]byte, 4<<10)
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			if _, werr := os.Stdout.Write(buf[:n]); werr != nil {
				os.Exit(1)
			}
		}
		if err != nil {
			os.Exit(0) // EOF: the gateway closed stdin
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBoundedLinesArriveWhole (attack29): many writers at once, each line
// bounded by a few milliseconds, to a child that reads slowly. Whatever
// each bound's outcome, the child's stream is whole lines only: every
// line whose write returned nil or errLinePartlySent arrives once and
// intact (the rest written by the process's goroutine, in order, before
// any other line), and no line that returned errLineNotSent arrives.
func TestBoundedLinesArriveWhole(t *testing.T) {
	sc := ServerConfig{Name: "slowcat", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{envSlowCat: "1"}}
	p, err := startProcess(sc, io.Discard, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if p.dl == nil {
		t.Skip("the child's stdin is not a pollable pipe here: no write deadline")
	}
	type line struct {
		G, I int
		Pad  string
	}
	arrived := make(chan []line, 1)
	go func() {
		var got []line
		r := bufio.NewReaderSize(p.out, 64<<10)
		for {
			b, err := r.ReadBytes('\n')
			if len(b) > 0 {
				var l line
				if jerr := json.Unmarshal(b, &l); jerr != nil {
					l = line{G: -1, Pad: fmt.Sprintf("%.80q: %v", b, jerr)}
				}
				got = append(got, l)
			}
			if err != nil {
				arrived <- got
				return
			}
		}
	}()

	const writers, each = 8, 10
	var mu sync.Mutex
	outcome := map[[2]int]error{}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				size := 1<<10 + (g*each+i)*1531%(128<<10)
				b, _ := json.Marshal(line{G: g, I: i, Pad: string(bytes.Repeat([]byte{'a' + byte(i)}, size))})
				bound := time.Duration(1+(g+i)%8) * 8 * time.Millisecond
				tm := time.NewTimer(bound)
				err := p.WriteBounded(append(b, '\n'), time.Now().Add(bound), nil, tm.C)
				tm.Stop()
				mu.Lock()
				outcome[[2]int{g, i}] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// The rest of a partly sent line holds the write lock until the
	// child took it: taking the lock waits for it (Close would cut it).
	p.lock(nil, nil)
	p.unlock()
	if err := p.Close(); err != nil { // the child copies what is left and exits at EOF
		t.Fatal(err)
	}
	var got []line
	select {
	case got = <-arrived:
	case <-time.After(time.Minute): // a hang guard, not a timing
		t.Fatal("the child's stdout did not end a minute after Close")
	}
	seen := map[[2]int]bool{}
	for _, l := range got {
		k := [2]int{l.G, l.I}
		if l.G < 0 {
			t.Fatalf("a line the child read is not one line written whole: %s", l.Pad)
		}
		want := 1<<10 + (l.G*each+l.I)*1531%(128<<10)
		if len(l.Pad) != want || int(strings0(l.Pad)) != 'a'+l.I || seen[k] {
			t.Fatalf("line %v: %d bytes of pad (want %d), seen before %v", k, len(l.Pad), want, seen[k])
		}
		seen[k] = true
	}
	counts := map[string]int{}
	for k, err := range outcome {
		switch {
		case err == nil:
			counts["sent"]++
		case errors.Is(err, errLinePartlySent):
			counts["partly sent"]++
		case errors.Is(err, errLineNotSent):
			counts["not sent"]++
			if seen[k] {
				t.Errorf("line %v: the write said %v, but the child read it", k, err)
			}
			continue
		default:
			t.Errorf("line %v: %v", k, err)
			continue
		}
		if !seen[k] {
			t.Errorf("line %v: the write said %v, but the child never read it", k, err)
		}
	}
	t.Logf("outcomes: %v; lines read by the child: %d", counts, len(got))
}

// strings0 is the first byte of s, or 0.
func strings0(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}

// TestWriteDeadlineWithoutRawio (attack29): the write deadline of a
// child's stdin does not depend on rawio wrapping it. Where WrapFile
// declines every file (rawio is Linux's only: on other systems
// startProcess set no deadline, and WriteBounded waited as before
// wbound28), a pipe the poller watches still has one; a regular file
// (never polled) has none.
func TestWriteDeadlineWithoutRawio(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	// Only Write, Close and SetWriteDeadline: rawPipe cannot wrap it.
	stdin := struct {
		io.WriteCloser
		deadliner
	}{w, w}
	if rawPipe(stdin) != nil {
		t.Fatal("rawPipe wrapped a pipe without SyscallConn")
	}
	d := writeDeadline(stdin)
	if d == nil {
		t.Fatal("a pollable pipe that rawio does not write: no write deadline")
	}
	// The deadline it gives ends a write to a full pipe.
	if err := d.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 1<<20)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a write past the pipe's room: %v, want os.ErrDeadlineExceeded", err)
	}
	f, err := os.Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if d := writeDeadline(f); d != nil {
		t.Fatal("a regular file (not polled): a write deadline")
	}
}
