package sqlstore

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestEachLeaseAsGetRequest (held27): EachLease reads, in chunks of
// leaseChunk ids, the state and lease GetRequest reports for each id:
// rows with their own lease, rows renewed through their instance's lease
// (leaseMarker), a request nobody holds; ids with no request are skipped,
// repeated ids read once per chunk they are in.
func TestEachLeaseAsGetRequest(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			ns := make([]int, leaseChunk+40)
			for i := range ns {
				ns[i] = i + 1
			}
			ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), ns...)
			renewed := ids[:leaseChunk/2]
			if _, err := db.RenewLeases(ctx, "gw-a", renewed, t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			free := pendingRequest(testID(len(ns) + 1))
			if err := db.CreateRequest(ctx, free); err != nil {
				t.Fatal(err)
			}
			ask := append(slices.Clone(ids), free.ID, testID(len(ns)+2), ids[0])
			got := map[approval.ID]store.Lease{}
			if err := db.EachLease(ctx, ask, func(l store.Lease) { got[l.ID] = l }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(ids)+1 {
				t.Errorf("EachLease of %d ids (%d requests) handed %d leases", len(ask), len(ids)+1, len(got))
			}
			for _, id := range append(slices.Clone(ids), free.ID) {
				r, err := db.GetRequest(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				want := store.Lease{ID: id, State: r.State, HeldBy: r.HeldBy, LeaseUntil: r.LeaseUntil}
				if l := got[id]; l != want {
					t.Errorf("%s: EachLease %+v, GetRequest %+v", id, l, want)
				}
			}
			if l := got[renewed[0]]; !l.LeaseUntil.Equal(t0.Add(time.Hour)) {
				t.Errorf("a renewed request's lease %v, want the instance's %v", l.LeaseUntil, t0.Add(time.Hour))
			}
		})
	}
}

// TestEachRequestAsListRequests (held27): EachRequest hands the page
// ListRequests returns, in its order, with its cursor; an error of fn
// ends the page and is returned as is, with no cursor.
func TestEachRequestAsListRequests(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			for i := range 25 {
				if err := db.CreateRequest(ctx, pendingRequest(testID(i+1))); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range []store.Filter{{}, {Limit: 10}, {Limit: 10, Cursor: string(testID(20))}, {Limit: 25}, {Limit: 24, Descending: true}} {
				wantIDs, wantNext, got, next := listAndEach(t, db, f)
				if !slices.Equal(got, wantIDs) || next != wantNext {
					t.Errorf("%+v: EachRequest %v next %q; ListRequests %v next %q", f, got, next, wantIDs, wantNext)
				}
			}
			stop := errors.New("stop")
			k := 0
			next, err := db.EachRequest(ctx, store.Filter{Limit: 10}, func(approval.Request) error {
				if k++; k == 3 {
					return stop
				}
				return nil
			})
			if !errors.Is(err, stop) || next != "" || k != 3 {
				t.Errorf("fn failing at the third request: %d handed, next %q, err %v; want 3, \"\", the error as is", k, next, err)
			}
		})
	}
}

// listAndEach returns the ids and cursor of ListRequests(f) and of
// EachRequest(f), read one after the other, each cursor without the
// running transactions it carries (cursorWithoutOpen).
func listAndEach(t *testing.T, db *DB, f store.Filter) (wantIDs []approval.ID, wantNext string, got []approval.ID, next string) {
	t.Helper()
	rs, wantNext, err := db.ListRequests(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		wantIDs = append(wantIDs, r.ID)
	}
	next, err = db.EachRequest(t.Context(), f, func(r approval.Request) error { got = append(got, r.ID); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return wantIDs, cursorWithoutOpen(t, wantNext), got, cursorWithoutOpen(t, next)
}

// cursorWithoutOpen returns the list cursor c ("" for none) without the
// running transactions it carries (store.ListPosition.Open). On Postgres
// they are the transactions of the whole server (other packages' tests
// share it) running below the page's last request when it was read: two
// reads of one page, one after the other, may carry different ones (CI
// under load, internal/api's TestListBodyAsBefore). The cursor's place
// in the list is kept.
func cursorWithoutOpen(t *testing.T, c string) string {
	t.Helper()
	if c == "" {
		return ""
	}
	p, err := store.ParseListCursor(c)
	if err != nil {
		t.Fatalf("cursor %q: %v", c, err)
	}
	p.Open = nil
	return p.String()
}

// BenchmarkEachLease: the batched read of Touched with 10,000 take-overs
// waiting (SQLite), against 10,000 GetRequests (one per wait, as each
// wait read its request before).
func BenchmarkEachLease(b *testing.B) {
	db := openTest(b, backends[0].fresh(b))
	ns := make([]int, 10000)
	for i := range ns {
		ns[i] = i + 1
	}
	ids := make([]approval.ID, len(ns))
	for i, n := range ns {
		r := pendingRequest(testID(n))
		r.Renew("gw-a", t0.Add(time.Minute))
		if err := db.CreateRequest(b.Context(), r); err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	b.Run("EachLease", func(b *testing.B) {
		for b.Loop() {
			k := 0
			if err := db.EachLease(b.Context(), ids, func(store.Lease) { k++ }); err != nil || k != len(ids) {
				b.Fatal(k, err)
			}
		}
	})
	b.Run("GetRequest", func(b *testing.B) {
		for b.Loop() {
			for _, id := range ids {
				if _, err := db.GetRequest(b.Context(), id); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestDecodeListAsUnmarshal (held27): decodeList's short cuts for "null"
// and "[]" give what json.Unmarshal gives (nil, and empty but not nil),
// and anything else is json.Unmarshal's.
func TestDecodeListAsUnmarshal(t *testing.T) {
	for _, text := range []string{"null", "[]", `["a","b"]`, `[ ]`, `[{"by":"x"}]`, `{`, `[1]`} {
		var want []string
		got, gotErr := decodeList[string](text)
		wantErr := json.Unmarshal([]byte(text), &want)
		if (gotErr == nil) != (wantErr == nil) || !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%s: decodeList %#v, %v; json.Unmarshal %#v, %v", text, got, gotErr, want, wantErr)
		}
	}
}

// decodeStringsCases are stored lists of strings: jsonText's own output
// and texts it never writes (spaces, escapes, broken shapes).
var decodeStringsCases = []string{
	"null", "[]", `[""]`, `["a"]`, `["a","b"]`, `["a","","b"]`, `["hidden character U+202E"]`,
	`["group:ops","alice"]`, `["😀 é","ü"]`, `["a", "b"]`, `[ "a"]`, `["a",]`, `["a",","b"]`, `["a""b"]`,
	`["a\"b"]`, `["\u003cx\u003e"]`, `["a\\"]`, "[\"a\tb\"]", "[\"a\x7fb\"]", "[\"\xff\"]", "[\"a\xc3\"]",
	`["a"`, `"a"]`, `[1]`, `["a",1]`, `{"a":"b"}`, `["]`, `[""","]`, `["","",""]`, `[",","]`, `["a"],["b"]`,
}

// TestDecodeStringsAsUnmarshal (list28): decodeStrings' short cut for
// plain lists gives json.Unmarshal's list and error, nil and empty kept
// apart.
func TestDecodeStringsAsUnmarshal(t *testing.T) {
	for _, text := range decodeStringsCases {
		checkDecodeStrings(t, text)
	}
}

func checkDecodeStrings(t *testing.T, text string) {
	t.Helper()
	var want []string
	got, gotErr := decodeStrings(text)
	wantErr := json.Unmarshal([]byte(text), &want)
	if (gotErr == nil) != (wantErr == nil) || (wantErr == nil && (!slices.Equal(got, want) || (got == nil) != (want == nil))) {
		t.Errorf("%q: decodeStrings %#v, %v; json.Unmarshal %#v, %v", text, got, gotErr, want, wantErr)
	}
}

func FuzzDecodeStrings(f *testing.F) {
	for _, text := range decodeStringsCases {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) { checkDecodeStrings(t, text) })
}
