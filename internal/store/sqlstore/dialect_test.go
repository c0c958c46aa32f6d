package sqlstore

import (
	"strings"
	"testing"
)

func TestDollarPlaceholders(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"none", `SELECT 1`, `SELECT 1`},
		{"in order", `UPDATE t SET a = ?, b = ? WHERE id = ?`, `UPDATE t SET a = $1, b = $2 WHERE id = $3`},
		{"string literal", `SELECT '?', ? FROM t WHERE k IN ('', 'a?b')`, `SELECT '?', $1 FROM t WHERE k IN ('', 'a?b')`},
		{"doubled quote", `SELECT 'it''s ?', ?`, `SELECT 'it''s ?', $1`},
		{"quoted identifier", `SELECT "a?" FROM t WHERE x = ?`, `SELECT "a?" FROM t WHERE x = $1`},
		{"comment", "SELECT ? -- why?\nFROM t WHERE x = ?", "SELECT $1 -- why?\nFROM t WHERE x = $2"},
		{"comment at the end", "SELECT ? -- ok?", "SELECT $1 -- ok?"},
		{"ten and more", placeholders(11), "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := dollarPlaceholders(tc.in); got != tc.want {
				t.Errorf("dollarPlaceholders(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestInListSizes: an IN list is written with a power of two of marks and
// padded with its last value.
func TestInListSizes(t *testing.T) {
	for _, c := range []struct{ n, marks int }{{1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {500, 512}, {513, 1024}} {
		vals := make([]any, c.n)
		for i := range vals {
			vals[i] = i
		}
		marks, args := inList(vals, "first")
		if got := strings.Count(marks, "?"); got != c.marks {
			t.Errorf("inList(%d values): %d marks, want %d", c.n, got, c.marks)
		}
		if len(args) != 1+c.marks || args[0] != "first" {
			t.Fatalf("inList(%d values): %d args starting %v, want %d starting with first", c.n, len(args), args[0], 1+c.marks)
		}
		for i, a := range args[1:] {
			if want := min(i, c.n-1); a != want {
				t.Fatalf("inList(%d values): arg %d = %v, want %v", c.n, i+1, a, want)
			}
		}
	}
}

// TestDollarJoin: dollarJoin of parts is dollarPlaceholders of their
// concatenation, numbered across the parts, over every pair of
// TestDollarPlaceholders' queries and a run of 300 placeholders; it
// allocates once (the string), which a deterministic count can say: the
// function touches nothing shared.
func TestDollarJoin(t *testing.T) {
	qs := []string{``, `SELECT 1`, `UPDATE t SET a = ?, b = ? WHERE id = ?`, `SELECT '?', ? FROM t WHERE k IN ('', 'a?b')`,
		`SELECT 'it''s ?', ?`, `SELECT "a?" FROM t WHERE x = ?`, "SELECT ? -- why?\nFROM t WHERE x = ?", placeholders(11), placeholders(300)}
	for _, a := range qs {
		for _, b := range qs {
			if got, want := dollarJoin(a, ", ", b), dollarPlaceholders(a+", "+b); got != want {
				t.Errorf("dollarJoin(%.40q, %.40q) = %.80q, want %.80q", a, b, got, want)
			}
		}
	}
	parts := []string{`WITH upd AS (`, `UPDATE t SET a = ?, b = ? WHERE id = ?`, `), ins AS (`, placeholders(300), `) SELECT 1`}
	if n := testing.AllocsPerRun(20, func() { _ = dollarJoin(parts...) }); n != 1 {
		t.Errorf("dollarJoin allocated %v times, want once", n)
	}
}
