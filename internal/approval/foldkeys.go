package approval

import (
	"fmt"
	"strings"

	"toolgate/internal/policy"
)

// warnFolds warns about each key of the object obj (at path; hidden: its
// keys the copy shows as a marker) that equals an earlier key under
// simple case folding, naming the two as shown (a hidden key by its
// marker), non-ASCII runes as \u escapes (the Kelvin sign is not K).
// Conditions see such arguments as an error (policy's decodeArgs) while
// an upstream decoding with Go's encoding/json reads the last key's value
// for both: the approver should know which value the tool gets. Up to
// foldScan keys it compares pairs (strings.EqualFold, which
// policy.FoldKey agrees with) and allocates nothing; past them it indexes
// policy.FoldKey.
func (d *displayer) warnFolds(obj node, hidden *hiddenKeys, path []pathStep) {
	key := func(k uint32) string { return d.t.text(d.t.nodes[obj.a+2*k]) }
	shown := func(k uint32) string {
		for _, h := range hidden.keys {
			if h.i == obj.a+2*k {
				return h.marker
			}
		}
		return key(k)
	}
	earlier := func(k uint32) (uint32, bool) {
		for j := range k {
			if strings.EqualFold(key(j), key(k)) {
				return j, true
			}
		}
		return 0, false
	}
	if obj.b > foldScan {
		first := make(map[string]uint32, obj.b)
		earlier = func(k uint32) (uint32, bool) {
			f := policy.FoldKey(key(k))
			if j, dup := first[f]; dup {
				return j, true
			}
			first[f] = k
			return 0, false
		}
	}
	for k := range obj.b {
		if j, ok := earlier(k); ok {
			d.warn(fmt.Sprintf("%s: keys %+q and %+q differ only in case; an upstream decoding with Go's encoding/json reads them as one field (the last), and policy conditions read neither",
				location(path), shown(j), shown(k)))
		}
	}
}

// foldScan is how many keys warnFolds compares pair by pair.
const foldScan = 16
