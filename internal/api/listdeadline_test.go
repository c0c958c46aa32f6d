package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// deadlineWriter is a countingWriter that notes each write deadline set
// (http.ResponseController finds SetWriteDeadline on it) and, at each
// write, how many were set since the previous one.
type deadlineWriter struct {
	countingWriter
	set, writes, bare int // deadlines set; writes; writes with none set since the previous write
	since             int
}

func (w *deadlineWriter) SetWriteDeadline(time.Time) error { w.set++; w.since++; return nil }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.since == 0 {
		w.bare++
	}
	w.since = 0
	return w.countingWriter.Write(p)
}

// TestListDeadlineMovesWithEachPiece (attack28): the page's write deadline
// bounded the whole page (listWriteTimeout, 30 s, set once with the
// headers) because the store's read stayed open while it was written.
// That read now ends before the client is written to (sqlstore reads the
// page in batches), and one deadline for a page of 1,000 approvals with
// large arguments (tens of MB) cut off a client that reads steadily but
// slowly (an inbox or CLI over a slow link: ≈ 1 MB/s or less) with an
// aborted page, every time it asks. The deadline now bounds each piece: a
// client that stops reading is still cut off listWriteTimeout after its
// last progress.
func TestListDeadlineMovesWithEachPiece(t *testing.T) {
	db := sqlitetest.Open(t)
	fillListed(t, db, 300, 600)
	s := New(gate.New(db, &policy.Policy{Default: policy.Allow}, nil), listAuth, nil)
	w := &deadlineWriter{countingWriter: countingWriter{h: http.Header{}}}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/approvals?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer bob")
	s.ServeHTTP(w, req)
	if w.writes < 4 {
		t.Fatalf("the page (%d bytes) was written in %d pieces, want several", w.n, w.writes)
	}
	if w.bare > 0 {
		t.Errorf("%d of the page's %d pieces were written without a new write deadline (%d set in all): the deadline bounds the whole page, not each piece",
			w.bare, w.writes, w.set)
	}
}
