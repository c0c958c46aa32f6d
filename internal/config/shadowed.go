package config

import (
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

// ShadowedRules returns one warning per rule of the policy of cfg (read
// from the config file at path) that never decides a call
// (policy.Policy.Shadowed), naming both rules with their file and line:
//
//	path:12: policy.rules[0] "scratch" (allow) never decides a call: policy.rules[1] "writes" (approve, path:7) matches every call it matches, and approve beats allow
//
// A rule whose line the file does not have (or a file that cannot be read
// again) is named without one.
func ShadowedRules(path string, cfg Config) []string {
	var root *yaml.Node
	if data, err := os.ReadFile(path); err == nil {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) == 1 {
			root = doc.Content[0]
		}
	}
	at := func(i int) string {
		if root != nil {
			if line := lineAt(root, fmt.Sprintf("policy.rules[%d]", i)); line > 0 {
				return fmt.Sprintf("%s:%d", path, line)
			}
		}
		return path
	}
	p := &cfg.Policy
	var out []string
	for _, s := range p.Shadowed() {
		a, b := &p.Rules[s.Rule], &p.Rules[s.By]
		hint := " (precedence does not depend on order; docs/policy.md \"An allow for part of an approve rule's calls never wins\")"
		if b.When != "" {
			hint = " (both rules have the same when)"
		}
		out = append(out, fmt.Sprintf("%s: policy.%s (%s) never decides a call: policy.%s (%s, %s) matches every call it matches, and %s beats %s%s",
			at(s.Rule), ruleLabel(p, s.Rule), a.Effect, ruleLabel(p, s.By), b.Effect, at(s.By), b.Effect, a.Effect, hint))
	}
	return out
}
