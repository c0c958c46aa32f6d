package policy

import (
	"strings"
	"testing"
)

func TestFoldKey(t *testing.T) {
	for _, pair := range [][2]string{{"reason", "REASON"}, {"k", "\u212a"}, {"straße", "STRASSE"}, {"ǅ", "ǆ"}, {"s", "ſ"}} {
		same := FoldKey(pair[0]) == FoldKey(pair[1])
		if same != strings.EqualFold(pair[0], pair[1]) {
			t.Errorf("FoldKey(%q) == FoldKey(%q) is %v; strings.EqualFold says %v", pair[0], pair[1], same, !same)
		}
	}
}
