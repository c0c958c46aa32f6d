package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
	"toolgate/internal/web"
)

// collectingBackend is the admin API as the inbox read it before list28:
// a page read whole (ListApprovals: the store's ListRequests, every
// approval converted), then handed over. Its pages are what the inbox
// showed then.
type collectingBackend struct{ *api.Server }

func (b collectingBackend) EachApproval(ctx context.Context, c api.Caller, f store.Filter, fn func(*api.Approval) error) (string, error) {
	l, err := b.ListApprovals(ctx, c, f)
	if err != nil {
		return "", err
	}
	for i := range l.Approvals {
		if err := fn(&l.Approvals[i]); err != nil {
			return "", err
		}
	}
	return l.NextCursor, nil
}

// TestInboxPagesAsBefore (list28; a guard, passes on the base): the
// inbox's page and fragment and the history's page, rendered from the
// approvals as the store reads them, are byte for byte the pages rendered
// from the page read whole, for every approver (a tenant's too), on full
// pages with a next page, the page after, and filters.
func TestInboxPagesAsBefore(t *testing.T) {
	var clock time.Time
	opts := &web.Options{Now: func() time.Time { return clock }}
	e := newEnv(t, opts)
	clock = e.now.Add(90 * time.Second)
	old, err := web.New(collectingBackend{e.api}, e.db, func(h string) (approval.Principal, []string, bool) {
		id, ok := e.people[h]
		return id.p, id.roles, ok
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 190 {
		raw := fmt.Sprintf(`{"path":"dir/<file>-%d.txt","content":"line one\nline two %s","token":"sk-live-abcdefghijklmnop%d","n":%d,"nested":{"a":[1,2,{"b":"%s"}]}}`,
			i, "\u202e", i, i, strings.Repeat("x", i*5))
		e.request(i+1, raw, func(r *approval.Request) {
			switch i % 6 {
			case 1:
				r.Approvers = []string{"group:ops", "alice"}
				r.OnBehalfOf = "carol"
			case 2:
				r.RequestedBy = "bob" // bob may not review his own
			case 3:
				r.Tenant = "acme"
				r.RequiredApprovals = 2
			case 4:
				r.Kind = "prompt_get"
			case 5:
				r.ExpiresAt = e.now.Add(time.Minute) // urgent
			}
		})
	}
	// Decided ones, for the history.
	for i := range 60 {
		id := approval.ID(fmt.Sprintf("0190%04x-0000-7000-8000-%012x", i+1, 0xabc000+i+1))
		if _, err := e.db.UpdateRequest(t.Context(), id, "alice", func(r *approval.Request) error {
			if i%2 == 0 {
				return r.Review(approval.Reviewer{ID: "alice", Groups: []string{"ops"}}, approval.VerdictDeny, "no <way>", "", e.now.Add(time.Second))
			}
			return r.Review(approval.Reviewer{ID: "alice", Groups: []string{"ops"}}, approval.VerdictApprove, "ok", "", e.now.Add(time.Second))
		}); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{"/ui/", "/ui/fragment/inbox", "/ui/history", "/ui/history?state=denied", "/ui/history?server=pay&tool=transfer",
		"/ui/history?requester=bob", "/ui/history?state=nonsense"}
	for _, tok := range []string{bobTok, viewerTok, acmeTok, aliceTok} {
		br := e.browser()
		br.signIn(tok)
		first := br.page("/ui/")
		m := regexpMore.FindStringSubmatch(first)
		ps := paths
		if m != nil {
			ps = append(ps, "/ui/?cursor="+m[1], "/ui/fragment/inbox?cursor="+m[1])
		} else if tok == bobTok {
			t.Fatal("bob's inbox has no next page: the fixture should fill more than one")
		}
		if n := strings.Count(first, "data-approval-id="); tok == bobTok && n != 100 {
			t.Fatalf("bob's inbox lists %d approvals, want 100", n)
		}
		for _, p := range ps {
			br.h = e.inbox
			got := br.do("GET", p, nil)
			br.h = old
			want := br.do("GET", p, nil)
			if got.status != want.status || got.body != want.body || fmt.Sprint(got.header) != fmt.Sprint(want.header) {
				t.Errorf("%s GET %s: %d, %d bytes; before: %d, %d bytes\n%s", tok, p, got.status, len(got.body), want.status, len(want.body),
					firstDiff(got.body, want.body))
			}
		}
	}
}

// firstDiff shows where a and b part.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("at byte %d: %q vs %q", i, a[i:min(len(a), i+80)], b[i:min(len(b), i+80)])
}

// heapStore is a real store that notes the live heap at each 10th row of
// a page read row by row (EachRequest) and once a page read whole
// (ListRequests) was read; fail, when set, ends EachRequest with an error
// after that many rows.
type heapStore struct {
	store.Store
	peak uint64
	fail int
}

var errBroke = fmt.Errorf("the store broke off: %w", store.ErrUnavailable)

func (s *heapStore) ListRequests(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	if s.fail > 0 {
		return nil, "", errBroke
	}
	rs, next, err := s.Store.ListRequests(ctx, f)
	s.peak = max(s.peak, liveHeap())
	runtime.KeepAlive(rs)
	return rs, next, err
}

func (s *heapStore) EachRequest(ctx context.Context, f store.Filter, fn func(approval.Request) error) (string, error) {
	i := 0
	return s.Store.EachRequest(ctx, f, func(r approval.Request) error {
		if i++; s.fail > 0 && i > s.fail {
			return errBroke
		}
		if i%10 == 0 {
			s.peak = max(s.peak, liveHeap())
		}
		return fn(r)
	})
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// newHeapEnv is newEnv over a heapStore.
func newHeapEnv(t *testing.T) (*env, *heapStore) {
	t.Helper()
	db := sqlitetest.Open(t)
	hs := &heapStore{Store: db}
	e := &env{t: t, db: db, now: time.Now().UTC(), people: map[string]identity{
		hashHex(bobTok): {approval.Principal{ID: "bob", Kind: "human"}, []string{api.RoleApprover}},
	}}
	pol := &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1}}
	e.g = gate.New(hs, pol, nil)
	e.api = api.New(e.g, func(tok string) (approval.Principal, []string, bool) {
		id, ok := e.people[hashHex(tok)]
		return id.p, id.roles, ok
	}, &api.Options{Sessions: e.g, Events: db, Grants: e.g})
	e.inbox = e.newInbox(nil)
	return e, hs
}

// TestInboxPageKeepsRowsNotApprovals (list28): the inbox's page of 100
// keeps each approval's row (its summary cut at 160 characters), not the
// approvals with their arguments whole: with 100 pending calls of 256 KB
// arguments the live heap while the page is read stays within a few MB
// of what it was before, where the page read whole held 25 MB.
func TestInboxPageKeepsRowsNotApprovals(t *testing.T) {
	e, hs := newHeapEnv(t)
	// The display copy cuts each string at 4,096 characters; a call's
	// arguments can still be large: 64 strings of 4,000 here.
	parts := make([]string, 64)
	for i := range parts {
		parts[i] = fmt.Sprintf("%q", strings.Repeat(string(rune('a'+i%26)), 4000))
	}
	pad := "[" + strings.Join(parts, ",") + "]"
	for i := range 100 {
		if r := e.request(i+1, fmt.Sprintf(`{"path":"dir/file-%d.txt","parts":%s}`, i, pad)); len(r.Arguments) < 256_000 {
			t.Fatalf("display copy of %d bytes, want 256 KB", len(r.Arguments))
		}
	}
	br := e.browser()
	br.signIn(bobTok)
	br.page("/ui/") // warm: templates parsed, statements prepared
	pad, parts = "", nil
	before := liveHeap()
	hs.peak = 0
	body := br.page("/ui/")
	if n := strings.Count(body, `data-approval-id=`); n != 100 {
		t.Fatalf("the page lists %d approvals, want 100", n)
	}
	grew := float64(hs.peak-min(hs.peak, before)) / (1 << 20)
	t.Logf("live heap before %.1f MB, at most %.1f MB above it while the page was read", float64(before)/(1<<20), grew)
	if grew > 6 {
		t.Errorf("the live heap was up to %.1f MB above what it was before while the inbox's page was read, want at most 6 (each approval made its row as it was read, not the page's 100 approvals of 256 KB kept whole)", grew)
	}
}

// TestInboxPageBrokenOffIsNotAPage (list28): a store error after part of
// the page was read is an error page (503, the store unavailable), and an
// error status for the live refresh's fragment, never a shorter list.
func TestInboxPageBrokenOffIsNotAPage(t *testing.T) {
	e, hs := newHeapEnv(t)
	for i := range 120 {
		e.request(i+1, fmt.Sprintf(`{"n":%d}`, i))
	}
	br := e.browser()
	br.signIn(bobTok)
	hs.fail = 50
	for _, p := range []string{"/ui/", "/ui/fragment/inbox"} {
		a := br.do("GET", p, nil)
		if a.status != http.StatusServiceUnavailable || strings.Contains(a.body, `data-approval-id=`) || strings.Contains(a.body, "pending") {
			t.Errorf("GET %s with the store failing after 50 rows: %d, %d cards\n%.300s", p, a.status, strings.Count(a.body, `data-approval-id=`), a.body)
		}
	}
	if !errors.Is(errBroke, store.ErrUnavailable) {
		t.Fatal("errBroke is not ErrUnavailable")
	}
}

// regexpMore finds the inbox's link to its next page.
var regexpMore = regexp.MustCompile(`href="/ui/\?cursor=([0-9A-Za-z._-]+)"`)
