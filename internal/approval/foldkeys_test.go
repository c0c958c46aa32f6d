package approval

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestDisplayWarnsKeysThatFold (policy44): keys of one object equal under
// simple case folding are read as one field by an upstream decoding with
// Go's encoding/json (the last wins) while conditions read neither; the
// approver's copy warns, naming both keys and where they are, also in
// nested objects, past foldScan keys, and for a key hidden by a pattern
// (by its marker). On 8308deeb the copy gave no warning.
func TestDisplayWarnsKeysThatFold(t *testing.T) {
	warning := func(at, a, b string) string {
		return fmt.Sprintf("%s: keys %+q and %+q differ only in case; an upstream decoding with Go's encoding/json reads them as one field (the last), and policy conditions read neither", at, a, b)
	}
	var many strings.Builder
	many.WriteString(`{"path":"/tmp/work/a"`)
	for i := range 40 { // past foldScan
		fmt.Fprintf(&many, `,"k%d":%d`, i, i)
	}
	many.WriteString(`,"PATH":"/etc/shadow"}`)
	for _, tt := range []struct {
		args string
		want []string
	}{
		{`{"path":"/tmp/work/a","PATH":"/etc/shadow"}`, []string{warning("$", "path", "PATH")}},
		{`{"path":"/tmp/work/a","opts":{"k":1,"\u212a":2,"K":3}}`, []string{warning("$.opts", "k", "\u212a"), warning("$.opts", "k", "K")}},
		{`{"list":[{"secret":1,"\u017fecret":2}]}`, []string{warning("$.list[0]", "secret", "\u017fecret")}},
		{many.String(), []string{warning("$", "path", "PATH")}},
		{`{"path":"/tmp/work/a","content":"x","a":{"path":1},"b":{"path":2}}`, nil},
	} {
		_, got, err := Display([]byte(tt.args), Redaction{})
		if err != nil {
			t.Fatalf("%s: %v", tt.args, err)
		}
		if len(got)+len(tt.want) > 0 && !slices.Equal(got, tt.want) {
			t.Errorf("%.60s: warnings %q, want %q", tt.args, got, tt.want)
		}
		p, err := Parse([]byte(tt.args))
		if err != nil {
			t.Fatal(err)
		}
		if _, pw := p.Display(Redaction{}); !slices.Equal(pw, got) {
			t.Errorf("%.60s: Parsed's Display warns %q, Display %q", tt.args, pw, got)
		}
	}
	// A key hidden by a pattern is named by its marker.
	rd := DefaultRedaction()
	const token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	_, got, err := Display([]byte(`{"`+token+`":1,"`+strings.ToUpper(token)+`":2}`), rd)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(got, func(w string) bool {
		return strings.Contains(w, "differ only in case") && !strings.Contains(w, token[4:])
	}) ||
		slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, token[4:]) }) {
		t.Errorf("hidden keys that fold: warnings %q; want a fold warning that does not show the key", got)
	}
}
