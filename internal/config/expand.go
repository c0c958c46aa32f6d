package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// expandTree expands variables in every scalar value under n, in place;
// mapping keys are never expanded. It returns one error per problem, each
// naming its line.
//
// The syntax, applied to the parsed value (so YAML quoting is already
// undone):
//
//	${NAME}            the value of NAME; an error if NAME is unset
//	                   (set but empty expands to "")
//	${NAME:-default}   the value of NAME if set and not empty, else default
//	                   (taken literally up to the first '}')
//	$$                 a literal '$'
//	$ anything else    a literal '$' ("^sk-.*$" needs no escaping)
//
// NAME is [A-Za-z_][A-Za-z0-9_]*. Expansion never creates structure: the
// result stays one scalar. A plain (unquoted) scalar is re-typed after
// expansion, so "max_conns: ${N}" can hold a number; a quoted one stays a
// string, and a non-empty result that reads as null stays a string.
func expandTree(n *yaml.Node, env Env) []error {
	var errs []error
	seen := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				walk(n.Content[i])
			}
		case yaml.ScalarNode:
			if !strings.Contains(n.Value, "$") {
				return
			}
			out, problems := expandString(n.Value, env)
			for _, p := range problems {
				errs = append(errs, fmt.Errorf("line %d: %s", n.Line, p))
			}
			if out == n.Value {
				return
			}
			n.Value = out
			if n.Style&(yaml.TaggedStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
				n.Tag = plainTag(out)
			}
		}
		// Aliases point at anchored nodes, which are walked where they are
		// defined.
	}
	walk(n)
	return errs
}

// plainTag returns the tag YAML resolves for the plain scalar s, except
// that a non-empty s never becomes null.
func plainTag(s string) string {
	tmp := yaml.Node{Kind: yaml.ScalarNode, Value: s}
	tag := tmp.ShortTag()
	if tag == "!!null" && s != "" {
		return "!!str"
	}
	return tag
}

// expandString expands s as expandTree documents, returning the result and
// a description of each problem.
func expandString(s string, env Env) (string, []string) {
	var b strings.Builder
	var problems []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c != '$':
			b.WriteByte(c)
			i++
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i += 2
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				problems = append(problems, fmt.Sprintf("unterminated %q (write $$ for a literal $)", s[i:]))
				b.WriteString(s[i:])
				i = len(s)
				continue
			}
			expr := s[i+2 : i+2+end]
			i += 2 + end + 1
			name, def, hasDef := strings.Cut(expr, ":-")
			if !validVarName(name) {
				problems = append(problems, fmt.Sprintf("${%s}: %q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", expr, name))
				continue
			}
			v, ok := env(name)
			switch {
			case ok && (v != "" || !hasDef):
				b.WriteString(v)
			case hasDef:
				b.WriteString(def)
			default:
				problems = append(problems, fmt.Sprintf("${%s} is not set (write ${%s:-default} to give a default)", name, name))
			}
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String(), problems
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

var cfgType = reflect.TypeFor[Config]()

// checkKeys reports every mapping key under n that the Go type t has no
// field for, as "line N: unknown key "k" in <path>". It is the strict
// decoding of yaml.Decoder.KnownFields, done on the node tree so that line
// numbers are those of the file. It also drops, in place, keys of struct
// fields whose value is empty (null), so that "approvals:" with everything
// commented out keeps the defaults instead of zeroing the section.
// Type mismatches are left to yaml's Decode.
func checkKeys(n *yaml.Node, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	var errs []error
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields := yamlFields(t)
		var keep []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				// "<<: *anchor" merges the anchored mapping(s) here.
				errs = append(errs, checkMerged(v, t, path)...)
				keep = append(keep, k, v)
				continue
			}
			f, ok := fields[k.Value]
			if !ok {
				errs = append(errs, fmt.Errorf("line %d: unknown key %q in %s (want one of: %s)",
					k.Line, k.Value, where(path), strings.Join(sortedKeys(fields), ", ")))
				keep = append(keep, k, v)
				continue
			}
			if f.Kind() == reflect.Struct && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
				continue // an empty section keeps its defaults
			}
			if err := checkDuration(v, f, join(path, k.Value)); err != nil {
				errs = append(errs, err)
				continue // dropped: it keeps its default, and go-yaml does not report it again
			}
			if err := checkShape(v, f, join(path, k.Value)); err != nil {
				errs = append(errs, err)
				continue // dropped, as above
			}
			errs = append(errs, checkKeys(v, f, join(path, k.Value))...)
			keep = append(keep, k, v)
		}
		n.Content = keep
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				// "<<: *anchor" merges the anchored mapping's entries
				// here (polish19: "servers: {<<: …}" was checked as a
				// server named "<<").
				errs = append(errs, checkMerged(v, t, path)...)
				continue
			}
			if err := checkShape(v, t.Elem(), join(path, k.Value)); err != nil {
				errs = append(errs, err)
				dropShape(v) // go-yaml does not report it again
				continue
			}
			errs = append(errs, checkKeys(v, t.Elem(), join(path, k.Value))...)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if err := checkShape(c, t.Elem(), p); err != nil {
				errs = append(errs, err)
				dropShape(c)
				continue
			}
			errs = append(errs, checkKeys(c, t.Elem(), p)...)
		}
	}
	return errs
}

// checkMerged is checkKeys of each mapping a merge key's value v names
// ("<<: *a" or "<<: [*a, *b]"), as a mapping of type t at path.
func checkMerged(v *yaml.Node, t reflect.Type, path string) []error {
	targets := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		targets = v.Content
	}
	var errs []error
	for _, m := range targets {
		errs = append(errs, checkKeys(m, t, path)...)
	}
	return errs
}

// yamlFields maps the YAML keys of struct type t to their field types,
// following yaml.v3's rules: the tag's name, else the lowercased field name;
// "-" skips; ",inline" structs contribute their own keys.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]reflect.Type) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

var durationType = reflect.TypeFor[time.Duration]()

// checkDuration checks a scalar n bound for a time.Duration field of type
// t (any other type is left alone) at path. A bare 0, which YAML types as
// a number and go-yaml refuses for a Duration, is re-tagged as a string,
// so it reads as zero (time.ParseDuration accepts "0"); the reference
// documents 0 for several keys. Any other value that does not parse is an
// error naming the line, the key and what to write instead.
func checkDuration(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t != durationType || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return nil
	}
	const how = "write a number with a unit (ms, s, m, h)"
	if _, err := time.ParseDuration(n.Value); err == nil {
		if n.ShortTag() != "!!str" {
			n.Tag = "!!str" // only "0" parses without a unit
		}
		return nil
	}
	if _, err := strconv.ParseFloat(n.Value, 64); err == nil {
		return fmt.Errorf("line %d: %s: %s has no unit: %s, such as %ss", n.Line, path, n.Value, how, n.Value)
	}
	return fmt.Errorf("line %d: %s: %q is not a duration: %s, such as 30s, 5m or 1h30m", n.Line, path, n.Value, how)
}
