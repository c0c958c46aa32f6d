package sqlstore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"toolgate/internal/store"
)

// TestAdvance: the position after a page read oldest first on Postgres
// (see listpage.go). Transaction ids here: the page's cursor was after
// (100, "m") with 90 and 95 open.
func TestAdvance(t *testing.T) {
	pos := store.ListPosition{Order: 100, ID: "m", Open: []uint64{90, 95}}
	for _, c := range []struct {
		name    string
		last    store.ListPosition
		running []uint64
		peeked  bool
		peek    uint64
		want    store.ListPosition
	}{
		{"passed pos, nothing running", store.ListPosition{Order: 120, ID: "a"}, nil, false, 0,
			store.ListPosition{Order: 120, ID: "a"}},
		{"passed pos, 95 and 110 still running, 130 above", store.ListPosition{Order: 120, ID: "a"}, []uint64{95, 110, 130}, true, 121,
			store.ListPosition{Order: 120, ID: "a", Open: []uint64{95, 110}}},
		{"same transaction as pos, a later id", store.ListPosition{Order: 100, ID: "z"}, []uint64{90}, false, 0,
			store.ListPosition{Order: 100, ID: "z", Open: []uint64{90}}},
		{"ended at 90's request, 95 not reached", store.ListPosition{Order: 90, ID: "q"}, nil, true, 95,
			store.ListPosition{Order: 100, ID: "m", Open: []uint64{95}}},
		{"ended at 95's request, 90 still running", store.ListPosition{Order: 95, ID: "q"}, []uint64{90}, true, 101,
			store.ListPosition{Order: 100, ID: "m", Open: []uint64{90}}},
		{"ended inside 90's requests", store.ListPosition{Order: 90, ID: "q"}, nil, true, 90,
			store.ListPosition{Order: 100, ID: "m", Open: []uint64{90, 95}}},
		{"ended at 95's last request", store.ListPosition{Order: 95, ID: "q"}, nil, true, 101,
			store.ListPosition{Order: 100, ID: "m"}},
	} {
		got := advance(pos, c.last, c.running, c.peeked, c.peek)
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", c.name, diff)
		}
	}
}
