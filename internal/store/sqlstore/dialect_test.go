package sqlstore

import "testing"

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
