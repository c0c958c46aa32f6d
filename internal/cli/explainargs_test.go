package cli

import (
	"strings"
	"testing"
)

// TestExplainArgsMustBeAnObject: --args is explained only as a tools/call
// could carry it (an object); an array, string or null is a usage error,
// as the gateway refuses such a call (-32602) and POST /v1/policy/explain
// answers 422.
func TestExplainArgsMustBeAnObject(t *testing.T) {
	for args, want := range map[string]string{
		`[{"amount":1}]`: "must be a JSON object",
		`"x"`:            "must be a JSON object",
		`null`:           "must be a JSON object",
		`{`:              "not valid JSON",
		` {"amount":1}`:  "",
		``:               "",
	} {
		b, err := explainBody("pay", "transfer", args, "", "")
		switch {
		case want == "" && err != nil:
			t.Errorf("--args %q: %v, want accepted", args, err)
		case want == "" && args != "" && string(b.Arguments) != args:
			t.Errorf("--args %q: arguments %s", args, b.Arguments)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("--args %q: %v, want an error containing %q", args, err, want)
		}
	}
}
