package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestListCursorRoundTrip: a ListPosition reads back from its String; an
// approval id (a cursor from before list orders) is the position of that
// id among the requests with list order 0; anything else is ErrBadCursor.
func TestListCursorRoundTrip(t *testing.T) {
	for _, p := range []ListPosition{
		{},
		{Order: 1, ID: "r1"},
		{Order: 1 << 40, ID: "01900000-0000-7000-8000-000000000001", Open: []uint64{3, 1<<40 - 5, 1<<40 - 1}},
	} {
		got, err := ParseListCursor(p.String())
		if p.ID == "" {
			if err == nil {
				t.Errorf("ParseListCursor(%q) of a position without an id = %+v, want an error", p.String(), got)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, p, cmp.Comparer(func(a, b []uint64) bool { return len(a) == len(b) && (len(a) == 0 || cmp.Equal(a, b)) })) {
			t.Errorf("ParseListCursor(%q) = %+v, %v; want %+v", p.String(), got, err, p)
		}
	}
	if p, err := ParseListCursor("01900000-0000-7000-8000-000000000001"); err != nil || p.Order != 0 || p.ID != "01900000-0000-7000-8000-000000000001" || p.Open != nil {
		t.Errorf("ParseListCursor(an id) = %+v, %v; want order 0 and that id", p, err)
	}
	if p, err := ParseListCursor(""); err != nil || p.Order != 0 || p.ID != "" {
		t.Errorf(`ParseListCursor("") = %+v, %v; want the start`, p, err)
	}
	bad := []string{"nope", "p.", "p.!!", "p.AAAA", strings.Repeat("a", 37),
		ListPosition{Order: 5, ID: "x", Open: []uint64{6}}.String(),    // open above the order
		ListPosition{Order: 5, ID: "x", Open: []uint64{3, 2}}.String(), // not ascending
		ListPosition{Order: 5, ID: "x", Open: []uint64{5}}.String(),    // the order itself
		ListPosition{Order: 5, ID: "x"}.String() + "A",
	}
	for _, s := range bad {
		if p, err := ParseListCursor(s); !errors.Is(err, ErrBadCursor) {
			t.Errorf("ParseListCursor(%q) = %+v, %v; want ErrBadCursor", s, p, err)
		}
	}
}
