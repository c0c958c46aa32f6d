package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// listFlushAt is how many bytes of a listed page listWriter gathers before
// it writes them to the client: a page of up to 1,000 approvals (≈ 1 KB
// each, more with large arguments) is sent in pieces of about this size,
// each row encoded as it is read, instead of being decoded, converted and
// encoded whole (≈ 10 KB live per listed approval at once; docs/performance.md,
// "held27").
const listFlushAt = 32 << 10

// listWriteTimeout bounds the writing of each piece of a listed page (set
// before each write): a client that stops reading is cut off this long
// after its last progress, and one that reads a large page slowly but
// steadily is not (attack28: it bounded the whole page while the store's
// read stayed open during the writes; sqlstore's EachRequest now ends
// each read before fn runs).
const listWriteTimeout = 30 * time.Second

// A listWriter writes the body of GET /v1/approvals as the store reads its
// rows: byte for byte what writeJSON writes for the whole [List] (the same
// encoder options, EscapeJSON applied to each piece, which starts and ends
// at an approval's boundary, where the text is ASCII), with writeJSON's
// headers. Nothing is sent before listFlushAt bytes were gathered or the
// page ended, so an error before that is still answered as an error.
type listWriter struct {
	w    http.ResponseWriter
	buf  bytes.Buffer
	enc  *json.Encoder
	esc  []byte // the escaped copy of a piece that needed one (EscapeJSON), reused
	n    int    // approvals encoded
	sent bool   // headers and some of the body sent
}

// listKeep is the largest buffer a listWriter keeps for the next page: a
// page of large arguments grows them past it, and they are dropped.
const listKeep = 4 * listFlushAt

// newListWriter returns a listWriter writing to w: one the last page left
// in s.listWriters, with its buffers (≈ 2 × 40 KB a page of 1,000 grew
// afresh, by doubling, on every page; docs/performance.md, list28), or a
// new one. putListWriter gives it back.
func (s *Server) newListWriter(w http.ResponseWriter) *listWriter {
	lw, _ := s.listWriters.Get().(*listWriter)
	if lw == nil {
		lw = &listWriter{}
		lw.enc = json.NewEncoder(&lw.buf)
		// As writeJSON: no HTML escaping.
		lw.enc.SetEscapeHTML(false)
	}
	lw.w, lw.n, lw.sent = w, 0, false
	lw.buf.Reset()
	lw.buf.WriteString(`{"approvals":[`)
	return lw
}

// putListWriter keeps lw for the next page, unless its buffers grew past
// listKeep.
func (s *Server) putListWriter(lw *listWriter) {
	lw.w = nil
	if lw.buf.Cap() > listKeep || cap(lw.esc) > listKeep {
		return
	}
	s.listWriters.Put(lw)
}

// add encodes a as the list's next approval, and writes what was gathered
// once it reaches listFlushAt.
func (lw *listWriter) add(a *Approval) error {
	mark := lw.buf.Len()
	if lw.n > 0 {
		lw.buf.WriteByte(',')
	}
	if err := lw.enc.Encode(a); err != nil {
		lw.buf.Truncate(mark)
		return fmt.Errorf("encode approval %s: %w", a.ID, err)
	}
	lw.buf.Truncate(lw.buf.Len() - 1) // Encode's newline
	lw.n++
	if lw.buf.Len() >= listFlushAt {
		return lw.flush()
	}
	return nil
}

// end closes the list with next as its cursor and writes the rest.
func (lw *listWriter) end(next string) error {
	lw.buf.WriteString(`],"next_cursor":`)
	if err := lw.enc.Encode(next); err != nil { // ends with the newline writeJSON's Encode writes
		return fmt.Errorf("encode next_cursor: %w", err)
	}
	lw.buf.WriteByte('}')
	// Encode wrote the cursor's newline before the brace: move it after.
	b := lw.buf.Bytes()
	b[len(b)-2], b[len(b)-1] = '}', '\n'
	return lw.flush()
}

// flush writes what was gathered, sending writeJSON's headers first.
func (lw *listWriter) flush() error {
	if !lw.sent {
		h := lw.w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		lw.w.WriteHeader(http.StatusOK)
		lw.sent = true
	}
	// Each piece within listWriteTimeout: a client that stops reading
	// does not keep the handler (and a page's buffer) for longer.
	_ = http.NewResponseController(lw.w).SetWriteDeadline(time.Now().Add(listWriteTimeout))
	out := lw.buf.Bytes()
	if i := firstToEscape(out, IsHidden); i >= 0 { // EscapeJSON, into a buffer kept for the next piece
		lw.esc = appendEscaped(lw.esc[:0], out, i, IsHidden)
		out = lw.esc
	}
	_, err := lw.w.Write(out)
	lw.buf.Reset()
	if err != nil {
		return &clientWriteError{err: err}
	}
	return nil
}

// A clientWriteError is a failed write of a listed page to the client: it
// went away, or stopped reading for listWriteTimeout. It is no fault of
// toolgate's or of its store.
type clientWriteError struct{ err error }

func (e *clientWriteError) Error() string { return "write to the client: " + e.err.Error() }
func (e *clientWriteError) Unwrap() error { return e.err }

// clientGone reports whether err, which ended a list in ctx (the
// request's context), came from the client's side: a write to it failed,
// or it went away (net/http cancels the request's context when its
// connection closes), which also ends the store's read.
func clientGone(ctx context.Context, err error) bool {
	var we *clientWriteError
	return errors.As(err, &we) || ctx.Err() != nil
}

// streamList lists the approvals of f that c may see, writing each as the
// store reads it (listWriter). An error before anything was sent is
// returned (the usual error answer follows). After the first bytes were
// sent the status and part of the page are with the client, which must
// not take the part for the whole: the handler panics with
// http.ErrAbortHandler, which makes net/http end the response without
// its terminating chunk (HTTP/1.1; HTTP/2 resets the stream), so the
// client reads an error (unexpected EOF), never a page that ends early.
// A client that went away or stopped reading (clientGone) is logged at
// INFO, not as a failure, and its response aborted so.
func (s *Server) streamList(w http.ResponseWriter, r *http.Request, c caller, f store.Filter) error {
	ctx := r.Context()
	lw := s.newListWriter(w)
	defer s.putListWriter(lw)
	var a Approval
	next, err := s.approvals.EachRequest(ctx, f, func(r approval.Request) error {
		if !visible(c, r) { // the filter already scopes by tenant; this is a second lock
			return nil
		}
		a = fromRequest(r)
		return lw.add(&a)
	})
	if err == nil {
		err = lw.end(next)
	}
	if err != nil && clientGone(ctx, err) {
		s.log.InfoContext(ctx, "list approvals: the client went away (or stopped reading); the response is aborted",
			keyMethod, r.Method, keyPath, r.URL.Path, keyRemote, r.RemoteAddr, keyPrincipal, c.principal.ID,
			keySent, lw.n, keyErr, err)
		panic(http.ErrAbortHandler)
	}
	if err == nil || !lw.sent {
		if err != nil {
			return fmt.Errorf("list approvals: %w", err)
		}
		return nil
	}
	s.log.ErrorContext(ctx, "list approvals: the page broke off after its first bytes were sent; the response is aborted", keyErr, err)
	panic(http.ErrAbortHandler)
}
