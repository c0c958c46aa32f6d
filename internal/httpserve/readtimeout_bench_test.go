package httpserve

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// deadlineWriter is a ResponseWriter whose read deadline is a field, as
// http.NewResponseController finds net/http's (SetReadDeadline).
type deadlineWriter struct {
	h        http.Header
	deadline time.Time
	sets     int
}

func (w *deadlineWriter) Header() http.Header         { return w.h }
func (w *deadlineWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *deadlineWriter) WriteHeader(int)             {}
func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.deadline, w.sets = t, w.sets+1
	return nil
}

// BenchmarkReadTimeoutBody is withReadTimeout's work for one POST whose
// handler reads its body to the end: the deadline set, the body wrapped,
// the deadline cleared at EOF. It checks that the deadline was cleared.
func BenchmarkReadTimeoutBody(b *testing.B) {
	h := withReadTimeout(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), time.Minute)
	w := &deadlineWriter{h: http.Header{}}
	body := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	r := &http.Request{Method: http.MethodPost}
	b.ReportAllocs()
	for b.Loop() {
		body.Seek(0, io.SeekStart) //nolint:errcheck // a strings.Reader's seek to 0 cannot fail
		r.Body = io.NopCloser(body)
		h.ServeHTTP(w, r)
	}
	if !w.deadline.IsZero() || w.sets == 0 {
		b.Fatalf("read deadline %v after %d sets, want cleared", w.deadline, w.sets)
	}
}

// rewindBody is a request body read again from its start after each EOF.
type rewindBody struct{ *strings.Reader }

func (b rewindBody) Close() error { return nil }

// TestReadTimeoutBodyOneAllocation: withReadTimeout sets the deadline,
// wraps the body once and clears the deadline at its end, with the body's
// wrapper the only allocation (a controller and a closure per POST were
// two more: docs/performance.md, "http47").
func TestReadTimeoutBodyOneAllocation(t *testing.T) {
	h := withReadTimeout(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), time.Minute)
	w := &deadlineWriter{h: http.Header{}}
	body := rewindBody{strings.NewReader(`{"jsonrpc":"2.0"}`)}
	r := &http.Request{Method: http.MethodPost}
	allocs := testing.AllocsPerRun(200, func() {
		body.Seek(0, io.SeekStart) //nolint:errcheck // a strings.Reader's seek to 0 cannot fail
		r.Body = body
		h.ServeHTTP(w, r)
		if !w.deadline.IsZero() {
			t.Fatalf("read deadline %v after the body's end, want cleared", w.deadline)
		}
	})
	if allocs != 1 {
		t.Errorf("%v allocations per POST, want 1 (the body's wrapper)", allocs)
	}
	if w.sets != 2*201 {
		t.Errorf("%d deadline sets, want %d (a set and a clear per POST)", w.sets, 2*201)
	}
}
