package gateway

import (
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readSizes is a reader of a child's stderr that records the largest read
// asked of it.
type readSizes struct {
	r   io.Reader
	max int
}

func (r *readSizes) Read(p []byte) (int, error) {
	r.max = max(r.max, len(p))
	return r.r.Read(p)
}

// TestStderrCopiedInSmallReads: what os/exec's copy of a child's stderr
// (io.Copy into the stderrLog) reads is asked for in stderrChunk bytes at
// most, not io.Copy's 32 KiB, and every line arrives whole, one longer
// than a read too.
func TestStderrCopiedInSmallReads(t *testing.T) {
	long := strings.Repeat("x", 3*stderrChunk+7)
	in := "first\r\n" + long + "\nlast\n"
	s := newStderrLog("up", slog.New(slog.DiscardHandler))
	src := &readSizes{r: iotestHalfReader(strings.NewReader(in))}
	n, err := io.Copy(s, src)
	if err != nil || n != int64(len(in)) {
		t.Fatalf("io.Copy = %d, %v; want %d, nil", n, err, len(in))
	}
	if src.max != stderrChunk {
		t.Errorf("largest read asked %d bytes, want %d", src.max, stderrChunk)
	}
	var got []stderrLine
	for len(s.lines) > 0 {
		got = append(got, <-s.lines)
	}
	want := []stderrLine{{text: "first"}, {text: long}, {text: "last"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(stderrLine{})); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// iotestHalfReader returns at most half of what each Read asks for (at
// least one byte), so that lines arrive split.
func iotestHalfReader(r io.Reader) io.Reader { return &halfReader{r} }

type halfReader struct{ r io.Reader }

func (h *halfReader) Read(p []byte) (int, error) {
	return h.r.Read(p[:max(1, len(p)/2)])
}

// TestStderrOfARealChild: a child's stderr through os/exec reaches the
// stderrLog line by line (exec's copy goroutine takes ReadFrom).
func TestStderrOfARealChild(t *testing.T) {
	s := newStderrLog("up", slog.New(slog.DiscardHandler))
	cmd := exec.Command("sh", "-c", `printf 'one\ntwo\n' >&2`)
	cmd.Stderr = s
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("sh: %v", ee)
		}
		t.Fatal(err)
	}
	var got []stderrLine
	for len(s.lines) > 0 {
		got = append(got, <-s.lines)
	}
	if diff := cmp.Diff([]stderrLine{{text: "one"}, {text: "two"}}, got, cmp.AllowUnexported(stderrLine{})); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
