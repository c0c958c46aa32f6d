package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/policy"
)

// lineError is a problem with the line of the file it is on.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// withLines returns errs with each problem that does not yet name its line
// given the line of the key it is about in the document root: a policy
// problem (*policy.FieldError) its rule's key, any other the key path its
// message starts with ("servers.fs.call_timeout -1s: ..."), or the
// nearest enclosing key the file has (a required key left out names its
// section). Problems whose key the file does not have at all are kept as
// they are. A joined error is taken apart.
func withLines(root *yaml.Node, errs []error) []error {
	var out []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // only a join at the top
			out = append(out, withLines(root, j.Unwrap())...)
			continue
		}
		if root == nil || lineRE.MatchString(err.Error()) {
			out = append(out, err)
			continue
		}
		line := 0
		var fe *policy.FieldError
		if errors.As(err, &fe) {
			line = fe.Line
			if line == 0 {
				line = lineAt(root, "policy."+fe.Path())
			}
			if fe.Key == "when" {
				line += celLine(root, fe, err.Error())
			}
		} else {
			msg := err.Error()
			end := strings.IndexAny(msg, " :")
			if end < 0 {
				end = len(msg)
			}
			line = lineAt(root, msg[:end])
		}
		if line > 0 {
			err = &lineError{line: line, err: err}
		}
		out = append(out, err)
	}
	return out
}

// celLineRE finds the line within a CEL expression that a compile error
// names.
var celLineRE = regexp.MustCompile(`: <input>:(\d+):\d+: `)

// celLine returns how many lines below the when key of fe the CEL error
// msg is: for a literal block ("when: |"), whose k-th line is k lines
// below the key, the line the error names; otherwise 0.
func celLine(root *yaml.Node, fe *policy.FieldError, msg string) int {
	m := celLineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	rules := mapValue(mapValue(root, "policy"), "rules")
	if rules == nil || rules.Kind != yaml.SequenceNode || fe.Rule < 0 || fe.Rule >= len(rules.Content) {
		return 0
	}
	v := mapValue(rules.Content[fe.Rule], "when")
	if v == nil || v.Style != yaml.LiteralStyle {
		return 0
	}
	k, _ := strconv.Atoi(m[1])
	return min(k, max(1, strings.Count(strings.TrimRight(v.Value, "\n"), "\n")+1)) // an error at the end names the last line
}

// lineRE matches a problem that names its line.
var lineRE = regexp.MustCompile(`^line (\d+): `)

// pathSegRE splits a key path into keys and [index]es.
var pathSegRE = regexp.MustCompile(`[^.\[\]]+|\[\d+\]`)

// lineAt returns the line in root of the key at path ("policy.rules[2].when",
// "servers.fs.url"), or of the deepest key on the way that the document
// has; 0 when it has not even the first.
func lineAt(root *yaml.Node, path string) int {
	n, line := root, 0
	for _, seg := range pathSegRE.FindAllString(path, -1) {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n == nil {
			break
		}
		var next *yaml.Node
		if idx, ok := strings.CutPrefix(seg, "["); ok {
			k, _ := strconv.Atoi(strings.TrimSuffix(idx, "]"))
			if n.Kind != yaml.SequenceNode || k >= len(n.Content) {
				break
			}
			next = n.Content[k]
			line = next.Line
		} else {
			if n.Kind != yaml.MappingNode {
				break
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg {
					next = n.Content[i+1]
					line = n.Content[i].Line
					break
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

// AtFile returns err (as Load returns it) with each problem naming path
// once: "path:12: msg" for a problem that names its line ("line 12: msg"),
// "path: msg" for one that does not. A joined error stays joined.
func AtFile(path string, err error) error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // only a join at the top
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, AtFile(path, e))
		}
		return errors.Join(out...)
	}
	text, ok := atLine(path, err.Error())
	if !ok {
		text = path + ": " + text
	}
	return &fileError{text: text, err: err}
}

// atLine rewrites the problem msg "line 12: rest" as "path:12: rest"; ok
// is false when msg names no line.
func atLine(path, msg string) (string, bool) {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return msg, false
	}
	return path + ":" + m[1] + ": " + msg[len(m[0]):], true
}

// fileError is a problem with its file (and line) in front.
type fileError struct {
	text string
	err  error
}

func (e *fileError) Error() string { return e.text }
func (e *fileError) Unwrap() error { return e.err }

// AtLines returns each of errs, problems found in the config file at path
// beyond what Check reports (such as policy.UnknownArgFields' warnings,
// whose keys are below "policy"), as one line "path:12: msg" naming the
// line of the key it is about, or "path: msg" when the file does not have
// it (or cannot be read again).
func AtLines(path string, errs []error) []string {
	var root *yaml.Node
	if data, err := os.ReadFile(path); err == nil {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) == 1 {
			root = doc.Content[0]
		}
	}
	var out []string
	for _, err := range withLines(root, errs) {
		if at, ok := atLine(path, err.Error()); ok {
			out = append(out, at)
		} else {
			out = append(out, path+": "+err.Error())
		}
	}
	return out
}
