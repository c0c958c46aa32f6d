package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// FieldError is one problem [Policy.Validate] or [ExplicitZeros] found,
// with the key it is about, so that a caller holding the document's YAML
// nodes can name the line (the config package does).
type FieldError struct {
	// Rule is the index of the rule in Policy.Rules, or -1 for a key of the
	// policy outside the rules.
	Rule int
	// Key is the key path below the rule (or the policy) that the problem
	// is about, as its message starts: "when", "approval.timeout",
	// "tools[1]", "command.argument"; it may name a key the document
	// leaves out (a required one), whose line is then the enclosing one.
	Key string
	// Line, when > 0, is the line of the document the problem is on,
	// relative to the policy's own document (set by ExplicitZeros).
	Line int
	Err  error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Path is the YAML key path of the problem below the policy:
// "rules[2].approval.timeout", "approval.mode", "rules[0]".
func (e *FieldError) Path() string {
	if e.Rule < 0 {
		return e.Key
	}
	p := "rules[" + strconv.Itoa(e.Rule) + "]"
	if e.Key != "" {
		p += "." + e.Key
	}
	return p
}

// fieldError wraps err, a problem of rule (-1: the policy) whose message
// starts with the key it is about (as every message of Validate does:
// "when: ...", "approval.timeout -1s: ...", "name "default" is ...").
func fieldError(rule int, err error) *FieldError {
	msg := err.Error()
	end := strings.IndexAny(msg, " :")
	if end < 0 {
		end = len(msg)
	}
	return &FieldError{Rule: rule, Key: msg[:end], Err: err}
}

// ExplicitZeros reports each approval override of a rule that the document
// n (a policy mapping, as decoded into a [Policy]) writes as zero:
// "approvals: 0", "timeout: 0s", "valid_for: 0s" (and "approvers: []"). In
// a rule's approval a
// zero field inherits the policy's value, so an explicit zero would
// silently mean the default (one approver, the default timeout) where its
// author most likely meant "none" or "never": it is refused, with the rule,
// the field, its line and what to write instead. (In the policy's own
// approval a zero is already refused by Validate.) Values that do not
// decode are left to the decoder. The errors are *FieldError.
func ExplicitZeros(n *yaml.Node) []error {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	rules := resolve(mapValue(n, "rules"))
	if rules == nil || rules.Kind != yaml.SequenceNode {
		return nil
	}
	var errs []error
	for i, r := range rules.Content {
		r = resolve(r)
		if r == nil || r.Kind != yaml.MappingNode {
			continue
		}
		a := resolve(mapValue(r, "approval"))
		if a == nil || a.Kind != yaml.MappingNode {
			continue
		}
		label := fmt.Sprintf("rules[%d]", i)
		if name := resolve(mapValue(r, "name")); name != nil && name.Kind == yaml.ScalarNode && name.Value != "" {
			label = fmt.Sprintf("rules[%d] %q", i, name.Value)
		}
		for _, f := range []struct{ key, instead string }{
			{"approvals", "omit it to inherit policy.approval.approvals, or write the number of approvals wanted (at least 1); for calls that need no approval, use effect: allow"},
			{"timeout", "omit it to inherit policy.approval.timeout, or write how long a request may stay pending (a request cannot wait forever)"},
			{"valid_for", "omit it to inherit policy.approval.valid_for, or write how long an approved call stays usable"},
		} {
			v := resolve(mapValue(a, f.key))
			if v == nil || v.Kind != yaml.ScalarNode || !isZero(v, f.key == "approvals") {
				continue
			}
			errs = append(errs, &FieldError{Rule: i, Key: "approval." + f.key, Line: v.Line,
				Err: fmt.Errorf("%s: approval.%s: %s is not allowed: a zero would silently inherit the policy's value; %s", label, f.key, v.Value, f.instead)})
		}
		// An empty list inherits too, where "approvers: []" reads as "anyone".
		if v := resolve(mapValue(a, "approvers")); v != nil && v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
			errs = append(errs, &FieldError{Rule: i, Key: "approval.approvers", Line: v.Line,
				Err: fmt.Errorf("%s: approval.approvers: an empty list is not allowed: it would silently inherit policy.approval.approvers, not mean anyone; omit it to inherit, or list who may review", label)})
		}
	}
	return errs
}

// isZero reports whether the scalar v is an explicit zero: an integer 0
// (count), or a duration or bare number that is 0.
func isZero(v *yaml.Node, count bool) bool {
	if v.ShortTag() == "!!null" {
		return false
	}
	if count {
		var k int64
		return v.Decode(&k) == nil && k == 0
	}
	if d, err := time.ParseDuration(v.Value); err == nil {
		return d == 0
	}
	f, err := strconv.ParseFloat(v.Value, 64)
	return err == nil && f == 0
}

// mapValue returns the value of key in mapping m, or nil (see
// [MappingValue]).
func mapValue(m *yaml.Node, key string) *yaml.Node { return MappingValue(m, key) }

// MappingValue returns the value that decoding the mapping m (an alias of
// one, or a document holding one) gives key, or nil: the value of the key
// m writes itself, else of the first mapping it merges ("<<: *a", "<<:
// [*a, *b]") that has it, as the decoder applies merges. A zero merged
// from an anchor is decoded as one written in place (attack18).
func MappingValue(m *yaml.Node, key string) *yaml.Node {
	return mergedValue(m, key, 0)
}

// maxMerge bounds how deep merges of merges are followed (a document that
// decoded has no cycle; this only bounds the work).
const maxMerge = 64

func mergedValue(m *yaml.Node, key string, depth int) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode || depth > maxMerge {
		return nil
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		switch {
		case k.Kind != yaml.ScalarNode:
		case k.Value == "<<" && k.ShortTag() == "!!merge":
			merges = append(merges, m.Content[i+1])
		case k.Value == key:
			return m.Content[i+1]
		}
	}
	for _, v := range merges {
		list := []*yaml.Node{v}
		if v = resolve(v); v != nil && v.Kind == yaml.SequenceNode {
			list = v.Content
		}
		for _, e := range list {
			if r := mergedValue(e, key, depth+1); r != nil {
				return r
			}
		}
	}
	return nil
}

// resolve follows an alias and unwraps a document node.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil {
		switch {
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		default:
			return n
		}
	}
	return nil
}
