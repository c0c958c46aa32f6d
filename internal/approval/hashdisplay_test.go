package approval

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestHashDisplayIsHashAndDisplay: HashDisplay answers as Hash and
// Display do, errors included.
func TestHashDisplayIsHashAndDisplay(t *testing.T) {
	rd := DefaultRedaction()
	for _, raw := range []string{
		``, `{}`, `{"to":"acct-1","amount":5}`, `{"b":1,"a":[1,2,{"z":null,"y":true}]}`,
		`{"password":"hunter2","nested":{"api_key":"x"}}`, `{"t":"a\u200bb"}`, `{"s":"` + strings.Repeat("é", 3000) + `"}`,
		`{"a":1,"a":2}`, `{"a":`, `[1,2]`, `"x"`, `{"n":12345678901234567890}`, `{} x`,
	} {
		h, herr := Hash(json.RawMessage(raw))
		d, w, derr := Display(json.RawMessage(raw), rd)
		gh, gd, gw, gerr := HashDisplay(json.RawMessage(raw), rd)
		if (herr == nil) != (gerr == nil) || (herr != nil && herr.Error() != gerr.Error()) || (derr == nil) != (herr == nil) {
			t.Errorf("%.40s: HashDisplay error %v; Hash %v, Display %v", raw, gerr, herr, derr)
			continue
		}
		if herr != nil {
			if !errors.Is(gerr, ErrInvalidJSON) && !errors.Is(gerr, ErrDuplicateKey) {
				t.Errorf("%.40s: error %v wraps neither sentinel", raw, gerr)
			}
			continue
		}
		if gh != h || string(gd) != string(d) || !slices.Equal(gw, w) {
			t.Errorf("%.40s: HashDisplay %s %s %q; Hash and Display %s %s %q", raw, gh, gd, gw, h, d, w)
		}
	}
}
