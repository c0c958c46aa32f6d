package config

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/policy"
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
	at := ruleLines(path)
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

// OverruledExactCalls returns one warning per allow rule of the policy of
// cfg that names exactly one call (`when: args == {…}`), or a family of
// them (`size(args) == 1 && args.command.matches(…)`: a call built from
// the pattern, quoted in the warning), which a deny or approve rule also
// matches, so it never allows it
// (policy.Policy.OverruledExactCalls), with the file's lines, as
// ShadowedRules does. A principal the rule names is evaluated with the
// groups, tenant and on-behalf-of of cfg's agent of that id.
func OverruledExactCalls(path string, cfg Config) []string {
	at := ruleLines(path)
	agent := func(id string) policy.Principal {
		p, _ := cfg.PolicyPrincipal(id)
		return p
	}
	p := &cfg.Policy
	var out []string
	for _, o := range p.OverruledExactCalls(agent) {
		b := &p.Rules[o.By]
		who := ""
		if o.Principal != "" {
			who = fmt.Sprintf(" from %q", o.Principal)
		}
		hint := ""
		if b.Command != nil {
			hint = "; a command rule matches every call it cannot read: add the same exception to its when (docs/policy.md \"Allowing a call no command rule allows\")"
		}
		what := "the one call its when names"
		if o.Example != "" {
			what = fmt.Sprintf("%q, a call its when admits", o.Example)
		}
		out = append(out, fmt.Sprintf("%s: policy.%s (allow) never allows %s%s: policy.%s (%s, %s) matches it too, and %s beats allow%s",
			at(o.Rule), ruleLabel(p, o.Rule), what, who, ruleLabel(p, o.By), b.Effect, at(o.By), b.Effect, hint))
	}
	return out
}

// ruleLines returns a func naming rule i of the config file at path as
// "path:LINE" (read again from the file), or "path" when the file or the
// line cannot be had.
func ruleLines(path string) func(i int) string {
	var root *yaml.Node
	if data, err := os.ReadFile(path); err == nil {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) == 1 {
			root = doc.Content[0]
		}
	}
	return func(i int) string {
		if root != nil {
			if line := lineAt(root, fmt.Sprintf("policy.rules[%d]", i)); line > 0 {
				return fmt.Sprintf("%s:%d", path, line)
			}
		}
		return path
	}
}

// A ShadowLog logs, at WARN, the rules of each policy put in force that
// never decide a call (policy.Policy.Shadowed: what `toolgate policy
// check` warns about), once per revision: serve calls Policy at start and
// after every store of the policy holder (a reload, a store revision),
// and a reload that changes nothing logs nothing again. Records name the
// rules by index and name and their effects, never arguments. Safe for
// concurrent use.
type ShadowLog struct {
	Log *slog.Logger

	mu   sync.Mutex
	last string // revision last logged
}

// Policy logs the never-deciding rules of p unless p's revision is the one
// it logged last. A nil p logs nothing.
func (l *ShadowLog) Policy(ctx context.Context, p *policy.Policy) {
	if p == nil {
		return
	}
	rev := policy.Revision(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if rev == l.last {
		return
	}
	l.last = rev
	for _, s := range p.Shadowed() {
		l.Log.WarnContext(ctx, "policy rule never decides a call: a rule of a stronger effect matches every call it matches (toolgate policy check names both lines)",
			"revision", rev, "rule", "policy."+ruleLabel(p, s.Rule), "effect", p.Rules[s.Rule].Effect,
			"by", "policy."+ruleLabel(p, s.By), "by_effect", p.Rules[s.By].Effect)
	}
}
