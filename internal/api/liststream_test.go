package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/eachstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// listTokens are the callers of the list tests: an approver of no
// tenant and one of tenant acme.
func listAuth(token string) (approval.Principal, []string, bool) {
	switch token {
	case "bob":
		return approval.Principal{ID: "bob", Kind: "human"}, []string{RoleApprover}, true
	case "erin":
		return approval.Principal{ID: "erin", Kind: "human", Tenant: "acme"}, []string{RoleApprover}, true
	}
	return approval.Principal{}, nil, false
}

// fillListed creates n requests in db, every field kind among them:
// arguments with HTML characters, a right-to-left override (EscapeJSON
// writes it as \u202E) and a character past U+FFFF, display warnings,
// approvers, reviews with and without grant terms and reasons, decided,
// consumed and dispatched ones, a policy request's kind, target and base
// revision, a held one with its lease, a timeout rule other than the
// rule, tenants. pad bytes of padding make each request's arguments
// larger.
func fillListed(tb testing.TB, db *sqlstore.DB, n, pad int) {
	tb.Helper()
	ctx := context.Background()
	base := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	for i := range n {
		id := approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012d", i+1))
		args := fmt.Sprintf(`{"cmd":"rm -rf /tmp/x && echo <done> %s%d","emoji":"😀","pad":%q}`, "\u202e", i, strings.Repeat("p", pad))
		r := approval.Request{
			ID: id, State: approval.StatePending, Server: "pay", Tool: "transfer",
			Arguments: json.RawMessage(args), ArgumentsHash: "sha256:" + strings.Repeat("a", 64),
			DisplayWarnings: []string{"hidden character U+202E"}, Rule: "payments", Mode: "hold",
			RequestedBy: "desktop", Tenant: []string{"", "acme"}[i%2], CreatedAt: base.Add(time.Duration(i) * time.Millisecond),
			ExpiresAt: base.Add(time.Hour), RequiredApprovals: 1 + i%2, TimeoutRule: "",
		}
		switch i % 5 {
		case 1:
			r.Approvers = []string{"group:ops", "alice"}
			r.OnBehalfOf = "carol"
		case 2:
			r.Kind, r.Target, r.BaseRevision = approval.KindSessionPolicy, "sess-1", 3
			r.Kind = "policy_change"
		case 3:
			r.TimeoutRule = "slow"
			r.PolicyRevision = "rev-9"
		}
		if err := db.CreateRequest(ctx, r); err != nil {
			tb.Fatal(err)
		}
		switch i % 5 {
		case 0, 4:
			if _, err := db.UpdateRequest(ctx, id, "test", func(r *approval.Request) error {
				r.HeldBy, r.LeaseUntil = "gw-1", base.Add(time.Minute)
				if i%5 == 4 {
					r.Reviews = []approval.Review{{By: "alice", Verdict: approval.VerdictApprove, Reason: "ok <fine>", At: base.Add(time.Second),
						Grant: &approval.GrantTerms{When: `args.amount < 10`, TTL: time.Hour, MaxUses: 3}}}
				}
				return nil
			}); err != nil {
				tb.Fatal(err)
			}
		case 1:
			if _, err := db.UpdateRequest(ctx, id, "test", func(r *approval.Request) error {
				r.State, r.DecidedBy, r.DecidedAt, r.Reason = approval.StateDenied, "bob", base.Add(2*time.Second), "no \u2066way"
				r.Reviews = []approval.Review{{By: "bob", Verdict: approval.VerdictDeny, Reason: "no \u2066way", At: base.Add(2 * time.Second)}}
				return nil
			}); err != nil {
				tb.Fatal(err)
			}
		case 3:
			if _, err := db.UpdateRequest(ctx, id, "test", func(r *approval.Request) error {
				r.State, r.DecidedBy, r.DecidedAt = approval.StateConsumed, "alice", base.Add(3*time.Second)
				r.ConsumedAt, r.DispatchOutcome = base.Add(4*time.Second), approval.OutcomeOK
				r.Reviews = []approval.Review{{By: "alice", Verdict: approval.VerdictApprove, At: base.Add(3 * time.Second)}}
				return nil
			}); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// wholeList is GET /v1/approvals as it was answered before it streamed
// (main 83cc2d6): the page read whole, converted, and written with
// writeJSON.
func wholeList(t *testing.T, s *Server, g *gate.Gate, token string, f store.Filter) *httptest.ResponseRecorder {
	t.Helper()
	p, _, _ := listAuth(token)
	f.Tenant = p.Tenant
	rs, next, err := g.List(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	out := List{Approvals: make([]Approval, 0, len(rs)), NextCursor: next}
	for _, a := range rs {
		if visible(caller{principal: p}, a) {
			out.Approvals = append(out.Approvals, fromRequest(a))
		}
	}
	rec := httptest.NewRecorder()
	s.writeJSON(rec, httptest.NewRequest(http.MethodGet, "/v1/approvals", nil), http.StatusOK, out)
	return rec
}

// TestListBodyAsBefore (held27): the streamed page is byte for byte the
// body (and the headers) the whole page written at once gives, on both
// stores: every field kind, pages that end with and without a cursor, a
// tenant's view, a state filter, an empty page, and pages larger than
// listFlushAt (sent in pieces).
func TestListBodyAsBefore(t *testing.T) {
	eachstore.Run(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		fillListed(t, db, 120, 600)
		g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
		s := New(g, listAuth, nil)
		for _, c := range []struct {
			token, query string
			f            store.Filter
		}{
			{"bob", "limit=1000", store.Filter{Limit: 1000}},
			{"bob", "", store.Filter{}},
			{"bob", "limit=7", store.Filter{Limit: 7}},
			{"bob", "limit=50&cursor=01900000-0000-7000-8000-000000000050", store.Filter{Limit: 50, Cursor: "01900000-0000-7000-8000-000000000050"}},
			{"bob", "state=pending&limit=1000", store.Filter{State: approval.StatePending, Limit: 1000}},
			{"bob", "state=denied", store.Filter{State: approval.StateDenied}},
			{"bob", "state=expired", store.Filter{State: approval.StateExpired}},
			{"bob", "order=newest&limit=7", store.Filter{Limit: 7, Descending: true}},
			{"bob", "order=oldest&limit=7", store.Filter{Limit: 7}},
			{"erin", "limit=1000", store.Filter{Limit: 1000}},
			{"erin", "limit=3&id_prefix=01900000-0000-7000-8000-00000000001", store.Filter{Limit: 3, IDPrefix: "01900000-0000-7000-8000-00000000001"}},
		} {
			want, got := wholeAndStreamed(t, s, g, c.token, c.query, c.f)
			if gb, wb := withoutOpen(t, got.Body.Bytes()), withoutOpen(t, want.Body.Bytes()); got.Code != want.Code || !bytes.Equal(gb, wb) {
				t.Errorf("%s ?%s: streamed %d, %d bytes; whole %d, %d bytes (next cursors without their running transactions); first difference at byte %d:\n got …%s…\nwant …%s…",
					c.token, c.query, got.Code, len(gb), want.Code, len(wb), firstDiff(gb, wb), around(gb, firstDiff(gb, wb)), around(wb, firstDiff(gb, wb)))
			}
			for _, h := range []string{"Content-Type", "Cache-Control", "X-Content-Type-Options"} {
				if got.Header().Get(h) != want.Header().Get(h) {
					t.Errorf("%s ?%s: %s %q, want %q", c.token, c.query, h, got.Header().Get(h), want.Header().Get(h))
				}
			}
			if c.query == "limit=1000" && c.token == "bob" && (got.Body.Len() < 3*listFlushAt || !bytes.Contains(got.Body.Bytes(), []byte(`\u202E`))) {
				t.Errorf("the whole page is %d bytes (want more than %d: sent in pieces) and has no escaped U+202E", got.Body.Len(), 3*listFlushAt)
			}
		}
	})
}

// wholeAndStreamed returns the page of f as wholeList writes it and as
// GET /v1/approvals?query streams it.
func wholeAndStreamed(t *testing.T, s *Server, g *gate.Gate, token, query string, f store.Filter) (want, got *httptest.ResponseRecorder) {
	t.Helper()
	want = wholeList(t, s, g, token, f)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/approvals?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	got = httptest.NewRecorder()
	s.ServeHTTP(got, req)
	return want, got
}

// nextCursor is a list body's next_cursor member.
var nextCursor = regexp.MustCompile(`"next_cursor":"([^"]+)"`)

// withoutOpen returns body with the running transactions its next cursor
// carries (store.ListPosition.Open) left out. On Postgres they are the
// transactions of the whole server (other packages' tests share it)
// running below the page's last request when the store read it: two
// reads of one page, one after the other, may carry different ones (CI
// under load: the whole page's cursor carried one, the streamed one's
// none; reading the whole page again after the streamed one, and
// comparing only when the two whole reads agreed, still failed 1 in 15).
// The cursor's place in the list is kept, and so compared.
func withoutOpen(t *testing.T, body []byte) []byte {
	t.Helper()
	return nextCursor.ReplaceAllFunc(body, func(m []byte) []byte {
		c := string(nextCursor.FindSubmatch(m)[1])
		p, err := store.ParseListCursor(c)
		if err != nil {
			t.Errorf("next_cursor %q: %v", c, err)
			return m
		}
		p.Open = nil
		return []byte(`"next_cursor":"` + p.String() + `"`)
	})
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func around(b []byte, i int) string {
	return string(b[max(i-60, 0):min(i+60, len(b))])
}

// brokenAfter is an Approvals whose page breaks off with err after n
// requests were handed out.
type brokenAfter struct {
	Approvals
	n   int
	err error
}

func (b brokenAfter) EachRequest(ctx context.Context, f store.Filter, fn func(approval.Request) error) (string, error) {
	i := 0
	_, err := b.Approvals.EachRequest(ctx, f, func(r approval.Request) error {
		if i == b.n {
			return b.err
		}
		i++
		return fn(r)
	})
	if err == nil && i == b.n {
		err = b.err
	}
	return "", err
}

// TestListBrokenOffIsNotAPage (held27): when the store's read fails after
// part of the page was sent, the client must not take the part for the
// whole: the response is aborted (no terminating chunk), and the client's
// read of the body fails. A failure before anything was sent is answered
// as before (503 unavailable).
func TestListBrokenOffIsNotAPage(t *testing.T) {
	db := sqlitetest.Open(t)
	fillListed(t, db, 200, 600)
	g := gate.New(db, &policy.Policy{Default: policy.Allow}, nil)
	broken := fmt.Errorf("list: %w: connection reset", store.ErrUnavailable)
	for _, c := range []struct {
		name   string
		after  int
		status int // 0: the body's read fails
	}{
		{"before anything was sent", 0, http.StatusServiceUnavailable},
		{"after the first pieces", 150, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(brokenAfter{Approvals: g, n: c.after, err: broken}, listAuth, nil)
			srv := httptest.NewServer(s)
			defer srv.Close()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/approvals?limit=1000", nil)
			req.Header.Set("Authorization", "Bearer bob")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if c.status != 0 {
				if err != nil || resp.StatusCode != c.status || !bytes.Contains(body, []byte(CodeUnavailable)) {
					t.Fatalf("answer %d %s (%v), want %d %s", resp.StatusCode, body, err, c.status, CodeUnavailable)
				}
				return
			}
			var l List
			if err == nil {
				jerr := json.Unmarshal(body, &l)
				t.Fatalf("the page broke off after %d approvals, but the client read %d %d bytes without an error (decoded: %d approvals, %v): it may take the part for the whole",
					c.after, resp.StatusCode, len(body), len(l.Approvals), jerr)
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("the body's read failed with %v, want an unexpected EOF", err)
			}
			if len(body) < listFlushAt {
				t.Errorf("the client read %d bytes before the abort; want the first pieces (≥ %d)", len(body), listFlushAt)
			}
		})
	}
}

// countingWriter is a ResponseWriter that counts the body's bytes.
type countingWriter struct {
	h http.Header
	n int
}

func (w *countingWriter) Header() http.Header         { return w.h }
func (w *countingWriter) WriteHeader(int)             {}
func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// readWatch is a real store that notes, when the page's last row was
// read, how many bytes of the answer the client had: for a page read
// whole (ListRequests) when the read returns, for one read row by row
// (EachRequest) when its last row was handed on.
type readWatch struct {
	store.Store
	w      *countingWriter
	atLast int
}

func (s *readWatch) ListRequests(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	rs, next, err := s.Store.ListRequests(ctx, f)
	s.atLast = s.w.n
	return rs, next, err
}

func (s *readWatch) EachRequest(ctx context.Context, f store.Filter, fn func(approval.Request) error) (string, error) {
	return s.Store.EachRequest(ctx, f, func(r approval.Request) error {
		s.atLast = s.w.n
		return fn(r)
	})
}

// TestListWritesAsItReads (held27): GET /v1/approvals used to read its
// page of up to 1,000 requests whole, convert it whole and encode it
// whole before the first byte was written (≈ 10 KB live per listed
// request: 9–11 MB at the end of a burst of 10,000 held calls while the
// inbox polls; docs/performance.md, rss26). Now each row is converted and
// encoded as it is read, and what was encoded is written every
// listFlushAt bytes: when the store hands the page's last row, all but
// the last piece is with the client.
func TestListWritesAsItReads(t *testing.T) {
	db := sqlitetest.Open(t)
	fillListed(t, db, 400, 600)
	w := &countingWriter{h: http.Header{}}
	watch := &readWatch{Store: db, w: w}
	s := New(gate.New(watch, &policy.Policy{Default: policy.Allow}, nil), listAuth, nil)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/approvals?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer bob")
	s.ServeHTTP(w, req)
	if w.n < 10*listFlushAt {
		t.Fatalf("the page is %d bytes, want more than %d", w.n, 10*listFlushAt)
	}
	// The last row's approval and the list's end are still to be
	// written then, with at most a piece gathered before them.
	if left := w.n - watch.atLast; left > 2*listFlushAt {
		t.Errorf("when the store handed the page's last row the client had %d of its %d bytes: %d still held, want at most %d (written as read, in pieces of %d)",
			watch.atLast, w.n, left, 2*listFlushAt, listFlushAt)
	}
}

// listOnce lists a page of 1,000 through s into w and fails unless it was
// answered 200.
func listOnce(tb testing.TB, s *Server, w *countingWriter) {
	tb.Helper()
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/v1/approvals?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer bob")
	w.n = 0
	s.ServeHTTP(w, req)
	if w.n < 1000 {
		tb.Fatalf("listed %d bytes", w.n)
	}
}

// BenchmarkListApprovals: GET /v1/approvals?limit=1000 on SQLite, 1,000
// requests with small arguments (the held-calls benchmark's kind);
// B/row and allocs/row are per listed request.
func BenchmarkListApprovals(b *testing.B) {
	benchList(b, sqlitetest.Open(b))
}

// benchList lists 1,000 requests with small arguments in db, page by page
// as GET /v1/approvals?limit=1000 does, b.N times.
func benchList(b *testing.B, db *sqlstore.DB) {
	b.Helper()
	fillListed(b, db, 1000, 0)
	s := New(gate.New(db, &policy.Policy{Default: policy.Allow}, nil), listAuth, nil)
	w := &countingWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		listOnce(b, s, w)
	}
	b.StopTimer()
	b.ReportMetric(float64(w.n)/1000, "body-B/row")
}

// TestListAllocatesLessPerRow (held27): a listed request costs what its
// row's read, conversion and encoding allocate, not also its place in a
// page collected whole, an []Approval of the page and an encoder's buffer
// grown to the page's size: on main 83cc2d6 ≈ 10 KB per listed request
// (1,000 with small arguments), now ≈ 3.9 KB (5.3 KB under -race).
func TestListAllocatesLessPerRow(t *testing.T) {
	perRow := allocPerListedRow(t)
	if perRow > 7000 {
		t.Errorf("listing 1,000 requests allocated %.0f B per listed request, want at most 7000 (each row converted and encoded as it is read, not the page collected, converted and encoded whole)", perRow)
	}
}

// allocPerListedRow lists 1,000 requests with small arguments on SQLite
// (once to warm statement caches and pools, then three times) and returns
// the bytes allocated per listed request.
func allocPerListedRow(t *testing.T) float64 {
	t.Helper()
	db := sqlitetest.Open(t)
	fillListed(t, db, 1000, 0)
	s := New(gate.New(db, &policy.Policy{Default: policy.Allow}, nil), listAuth, nil)
	w := &countingWriter{h: http.Header{}}
	listOnce(t, s, w) // warm: statement caches, pools
	const rounds = 3
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range rounds {
		listOnce(t, s, w)
	}
	runtime.ReadMemStats(&after)
	perRow := float64(after.TotalAlloc-before.TotalAlloc) / (rounds * 1000)
	t.Logf("%.0f B allocated per listed request (%d body bytes per page)", perRow, w.n)
	return perRow
}

// liveHeap collects and returns the live heap.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// gcWriter is a ResponseWriter that notes the live heap at each write.
type gcWriter struct {
	countingWriter
	peak uint64
}

func (w *gcWriter) Write(p []byte) (int, error) {
	w.peak = max(w.peak, liveHeap())
	return w.countingWriter.Write(p)
}

// gcStore is a real store that notes, in w, the live heap when a page
// read whole was read (ListRequests) and at every 50th row of a page
// read row by row (EachRequest).
type gcStore struct {
	store.Store
	w *gcWriter
}

func (s *gcStore) ListRequests(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	rs, next, err := s.Store.ListRequests(ctx, f)
	s.w.peak = max(s.w.peak, liveHeap())
	runtime.KeepAlive(rs)
	return rs, next, err
}

func (s *gcStore) EachRequest(ctx context.Context, f store.Filter, fn func(approval.Request) error) (string, error) {
	i := 0
	return s.Store.EachRequest(ctx, f, func(r approval.Request) error {
		if i++; i%50 == 0 {
			s.w.peak = max(s.w.peak, liveHeap())
		}
		return fn(r)
	})
}

// TestListLiveHeapStaysSmall (held27): while a page of 1,000 requests (1
// KB of arguments each) is read and written, what the list keeps
// reachable is about a piece and a row, not the page: the live heap
// (after a collection) when the page was read and at each write of the
// body, less the live heap before the request. On main 83cc2d6 the
// page's requests were all live once read, then their conversions, the
// encoder's buffer and the body.
func TestListLiveHeapStaysSmall(t *testing.T) {
	db := sqlitetest.Open(t)
	fillListed(t, db, 1000, 1000)
	w := &gcWriter{countingWriter: countingWriter{h: http.Header{}}}
	s := New(gate.New(&gcStore{Store: db, w: w}, &policy.Policy{Default: policy.Allow}, nil), listAuth, nil)
	listOnce(t, s, &w.countingWriter) // warm: statement caches, pools
	before := liveHeap()
	w.peak = 0
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/approvals?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer bob")
	s.ServeHTTP(w, req)
	held := 0.0 // MB
	if w.peak > before {
		held = float64(w.peak-before) / (1 << 20)
	}
	t.Logf("live heap while the page (%d bytes) was read and written: at most %.2f MB above before", w.n, held)
	if held > 1 {
		t.Errorf("while a page of 1,000 requests (%d bytes) was read and written the live heap was up to %.2f MB above what it was before, want at most 1 MB (each row converted and encoded as it is read, written every %d bytes)",
			w.n, held, listFlushAt)
	}
}
