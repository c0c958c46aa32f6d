package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkShape checks that node n has the shape the field type t at path
// takes: a list for a slice, a mapping for a map or struct, a single value
// for the rest, and true/false or a number for a bool or a number. A
// mismatch is an error naming the line, the key and what to write (go-yaml
// would say "cannot unmarshal !!str `x` into []string", with neither the key
// nor the fix); the caller then drops the node, so go-yaml does not report
// it again. A type that decodes itself (yaml.Unmarshaler) is decoded here
// to name the key in its error (checkUnmarshal). An empty value (null) and
// an interface are left alone.
func checkShape(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return checkUnmarshal(n, t, path)
	}
	got := map[yaml.Kind]string{yaml.SequenceNode: "a list", yaml.MappingNode: "a mapping of keys to values"}[n.Kind]
	switch t.Kind() {
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			return nil
		}
		if n.Kind == yaml.ScalarNode && len(n.Value) > shownMax {
			return fmt.Errorf("line %d: %s: %s is a single value; want a list: write [a, b] (or one \"- item\" per line under the key)", n.Line, path, shown(n.Value))
		}
		if n.Kind == yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: %q is a single value; want a list: write [%s] (or one \"- %s\" per line under the key)", n.Line, path, n.Value, n.Value, n.Value)
		}
		return fmt.Errorf("line %d: %s: want a list ([a, b], or one \"- item\" per line), not %s", n.Line, path, got)
	case reflect.Map, reflect.Struct:
		if n.Kind == yaml.MappingNode {
			return nil
		}
		if n.Kind == yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: %s is a single value; want a mapping of keys to values (\"key: value\" lines indented under %s, or {key: value})", n.Line, path, shown(n.Value), lastKey(path))
		}
		return fmt.Errorf("line %d: %s: want a mapping of keys to values, not %s (a \"- \" starts a list item)", n.Line, path, got)
	case reflect.Interface:
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s: want a single value, not %s", n.Line, path, got)
	}
	switch t.Kind() {
	case reflect.Bool:
		if n.ShortTag() != "!!bool" && !oldBool[n.Value] {
			return fmt.Errorf("line %d: %s: %s is not true or false%s", n.Line, path, shown(n.Value), quotedHint(n, "!!bool"))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t == durationType {
			return nil // checkDuration's
		}
		if f, err := strconv.ParseFloat(n.Value, 64); n.ShortTag() != "!!int" && (n.ShortTag() != "!!float" || err != nil || f != float64(int64(f))) {
			return fmt.Errorf("line %d: %s: %s is not a whole number%s", n.Line, path, shown(n.Value), quotedHint(n, "!!int"))
		}
	case reflect.Float32, reflect.Float64:
		if _, err := strconv.ParseFloat(n.Value, 64); err != nil {
			return fmt.Errorf("line %d: %s: %s is not a number", n.Line, path, shown(n.Value))
		}
	}
	return nil
}

// checkUnmarshal decodes node n into a new value of t, a type that decodes
// itself (yaml.Unmarshaler, such as ByteSize), and returns its error as
// "line N: path: problem". Left to go-yaml, that error named the line but
// not the key ("line 5: want a size such as 64MiB"), and, not being a
// *yaml.TypeError, it ended the decoding, so the file's other problems
// went unreported (tail40). A *lineError's own line gives way to n's.
func checkUnmarshal(n *yaml.Node, t reflect.Type, path string) error {
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	var le *lineError
	if errors.As(err, &le) {
		err = le.err
	}
	return &lineError{line: n.Line, err: fmt.Errorf("%s: %w", path, err)}
}

// shownMax is the longest value a shape error quotes whole. A value of the
// wrong shape may be a secret (an upstream's "args: --api-key=…", "env:
// KEY=…", "headers: ${AUTH}", "storage: ${DATABASE_URL}": a ${VAR} is
// expanded before the shape is checked), and problems go to stderr and
// serve's log; so, as go-yaml's "cannot unmarshal" did, a longer value
// shows its first 7 bytes only.
const shownMax = 10

// shown is value v quoted for a shape error: whole up to shownMax bytes,
// else its first 7 bytes and "…" (see shownMax).
func shown(v string) string {
	if len(v) <= shownMax {
		return strconv.Quote(v)
	}
	return strconv.Quote(strings.ToValidUTF8(v[:7], "")) + "…"
}

// quotedHint is the hint for a quoted scalar n that would read as tag
// (!!bool, !!int) unquoted: `"true"` or `"5"` is text in YAML, and go-yaml
// will not decode text into a bool or a number; "" otherwise.
func quotedHint(n *yaml.Node, tag string) string {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 || plainTag(n.Value) != tag {
		return ""
	}
	return " (it is quoted, which makes it text: write it without quotes)"
}

// oldBool are the YAML 1.1 spellings go-yaml still decodes into a bool.
var oldBool = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": true, "N": true, "no": true, "No": true, "NO": true, "off": true, "Off": true, "OFF": true,
}

// lastKey is the last key of a dotted path ("servers.fs" → "fs").
func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// dropShape makes n, a map value or list item of the wrong shape, an empty
// value, so that go-yaml decodes it as the zero value instead of reporting
// it a second time. An alias node itself is replaced, never what it names.
func dropShape(n *yaml.Node) {
	*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
}
