package config

import (
	"strings"
	"testing"
)

// attack18: a zero that arrives through a YAML merge key ("<<: *anchor") is
// decoded as if written in place (the decoder applies merges), so it must
// be refused as that zero is: before, ExplicitZeros and explicitZeros
// looked only at a mapping's own keys, and a rule's approval that merged
// "timeout: 0s" silently inherited the policy's 5m. An anchor's keys must
// all be known where it is merged, so the zero comes from a map whose
// values are free (a server's headers here). An explicit key beside the
// merge wins over the merged one, as the decoder has it, and the first of
// a list of merges wins over later ones: overriding a merged zero stays
// valid.
func TestMergedZeroIsRefused(t *testing.T) {
	const head = "listen: { mcp: 127.0.0.1:0 }\nservers:\n  pay:\n    url: \"http://127.0.0.1:9/mcp\"\n" +
		"    headers: &zero { timeout: \"0s\", valid_for: \"0s\" }\n" + // line 5
		"  other:\n    url: \"http://127.0.0.1:9/o\"\n    headers: &ok { timeout: \"1m\" }\n" +
		"  third:\n    url: \"http://127.0.0.1:9/t\"\n    headers: &conn { connect_timeout: \"0s\" }\n"
	const policyHead = "policy:\n  default: allow\n  approval: { timeout: 5m, mode: hold, approvals: 2, valid_for: 10m }\n  rules:\n"
	tests := []struct {
		name, text string
		want       []string // each a part of the error; none: it loads
	}{
		{"rule approval merges a zero", head + policyHead +
			"    - name: w\n      effect: approve\n      approval:\n        <<: *zero\n        mode: hold\n",
			[]string{`line 5: policy.rules[0] "w": approval.timeout: 0s is not allowed`, `approval.valid_for: 0s is not allowed`}},
		{"merge list, first wins", head + policyHead +
			"    - name: w\n      effect: approve\n      approval:\n        <<: [*zero, *ok]\n",
			[]string{"approval.timeout: 0s is not allowed"}},
		{"nested merge: the inner explicit keys win", head + policyHead +
			"    - name: v\n      effect: approve\n      approval: &inner\n        <<: *zero\n        timeout: 1m\n        valid_for: 1m\n" +
			"    - name: w\n      effect: approve\n      approval:\n        <<: [*inner]\n", nil},
		{"server merges connect_timeout 0", head + "  b:\n    <<: *conn\n    url: \"http://127.0.0.1:9/b\"\n",
			[]string{"line 11: servers.b.connect_timeout: 0s is not allowed"}},
		{"explicit key overrides a merged zero", head + policyHead +
			"    - name: w\n      effect: approve\n      approval:\n        <<: *zero\n        timeout: 2m\n        valid_for: 1m\n", nil},
		{"later merge does not override the first", head + policyHead +
			"    - name: w\n      effect: approve\n      approval:\n        <<: [*ok, *zero]\n        valid_for: 1m\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(t, tt.text, nil)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Load:\n%v\nwant it to load (an explicit key wins over a merged one)", err)
				}
				for _, r := range cfg.Policy.Rules {
					if r.Approval != nil && (r.Approval.Timeout == 0 || r.Approval.ValidFor == 0) && r.Name == "w" {
						t.Errorf("rule %q approval %+v after load: a merged zero won", r.Name, *r.Approval)
					}
				}
				return
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Load error:\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}
