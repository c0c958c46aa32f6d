package policy

import (
	"fmt"
	"strings"
)

// Kind is what a call uses: a tool (tools/call), a resource (resources/read,
// resources/subscribe) or a prompt (prompts/get). Issue 10 put all three
// under the same gate.
type Kind string

const (
	// KindTool is a tools/call; the empty Kind means the same.
	KindTool Kind = "tool"
	// KindResource is a read of (or a subscription to) a resource URI.
	KindResource Kind = "resource"
	// KindPrompt is a prompts/get.
	KindPrompt Kind = "prompt"
)

// Valid reports whether k is one of the kinds (or empty, a tool).
func (k Kind) Valid() bool {
	return k == "" || k == KindTool || k == KindResource || k == KindPrompt
}

// Name returns the name of what c uses: its tool name, resource URI or
// prompt name, after its Kind.
func (c Call) Name() string {
	switch c.Kind {
	case KindResource:
		return c.Resource
	case KindPrompt:
		return c.Prompt
	}
	return c.Tool
}

// Label names what c uses for people: "fs__write_file", "resource
// file:///a (server fs)", "prompt fs__review".
func (c Call) Label() string {
	switch c.Kind {
	case KindResource:
		return fmt.Sprintf("resource %s (server %s)", c.Resource, c.Server)
	case KindPrompt:
		return "prompt " + c.Server + "__" + c.Prompt
	}
	return c.Server + "__" + c.Tool
}

// selectorText describes a rule's resources and prompts for Diff:
// " resources [file:///*] prompts [review]".
func selectorText(r *Rule) string {
	var b strings.Builder
	if len(r.Resources) > 0 {
		fmt.Fprintf(&b, " resources %s", list(r.Resources))
	}
	if len(r.Prompts) > 0 {
		fmt.Fprintf(&b, " prompts %s", list(r.Prompts))
	}
	return b.String()
}

// compareSelectors lists the changes of a kept rule's resources and
// prompts; any change of what a rule matches counts as widening.
func compareSelectors(label string, or, nr *Rule) []change {
	var out []change
	for _, s := range []struct {
		what     string
		old, new []string
	}{{"resources", or.Resources, nr.Resources}, {"prompts", or.Prompts, nr.Prompts}} {
		if !sameSet(s.old, s.new) {
			out = append(out, change{text: fmt.Sprintf("%s: %s changed from %s to %s", label, s.what, listOf(s.old), listOf(s.new)), widens: true, why: "any change of a rule's match counts as widening"})
		}
	}
	return out
}

// listOf writes a resources or prompts list; an empty one is "[]".
func listOf(s []string) string {
	return "[" + strings.Join(s, " ") + "]"
}
