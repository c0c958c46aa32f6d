package approval

import (
	"fmt"
	"strings"

	"toolgate/internal/policy"
)

// warnFolds warns about each key of the object obj (at path; shown: its
// keys as the copy shows them, in order) that equals an earlier key under
// simple case folding, naming the two as shown (a hidden key by its
// marker), non-ASCII runes as \u escapes (the Kelvin sign is not K). Conditions see such arguments as an error (policy's decodeArgs)
// while an upstream decoding with Go's encoding/json reads the last key's
// value for both: the approver should know which value the tool gets.
// Up to foldScan keys it compares pairs (strings.EqualFold, which
// policy.FoldKey agrees with); past them it indexes policy.FoldKey.
func (d *displayer) warnFolds(obj node, shown []string, path []pathStep) {
	key := func(k int) string { return d.t.text(d.t.nodes[obj.a+2*uint32(k)]) }
	earlier := func(k int) int {
		for j := range k {
			if strings.EqualFold(key(j), key(k)) {
				return j
			}
		}
		return -1
	}
	if len(shown) > foldScan {
		first := make(map[string]int, len(shown))
		earlier = func(k int) int {
			f := policy.FoldKey(key(k))
			if j, dup := first[f]; dup {
				return j
			}
			first[f] = k
			return -1
		}
	}
	for k := range shown {
		if j := earlier(k); j >= 0 {
			d.warn(fmt.Sprintf("%s: keys %+q and %+q differ only in case; an upstream decoding with Go's encoding/json reads them as one field (the last), and policy conditions read neither",
				location(path), shown[j], shown[k]))
		}
	}
}

// foldScan is how many keys warnFolds compares pair by pair.
const foldScan = 16
