package policy

import (
	"fmt"
	"strings"
)

// Annotations are a tool's MCP annotation hints (readOnlyHint,
// destructiveHint, idempotentHint, openWorldHint) with the defaults of the
// MCP specification (2025-06-18, ToolAnnotations) applied; see
// [AnnotationsFromHints]. The gateway passes them only for servers marked
// trust_annotations: hints are claims of the server, not facts.
type Annotations struct {
	ReadOnly    bool `json:"read_only"`
	Destructive bool `json:"destructive"`
	Idempotent  bool `json:"idempotent"`
	OpenWorld   bool `json:"open_world"`
}

// AnnotationsFromHints resolves the four hints of a tool definition (nil for
// a hint the tool does not give) with the MCP defaults: readOnlyHint false,
// destructiveHint true, idempotentHint false, openWorldHint true. As the
// specification says destructiveHint and idempotentHint mean something
// only when readOnlyHint is false, a read-only tool is never destructive
// and always idempotent.
func AnnotationsFromHints(readOnly, destructive, idempotent, openWorld *bool) Annotations {
	a := Annotations{Destructive: true, OpenWorld: true}
	if readOnly != nil {
		a.ReadOnly = *readOnly
	}
	if destructive != nil {
		a.Destructive = *destructive
	}
	if idempotent != nil {
		a.Idempotent = *idempotent
	}
	if openWorld != nil {
		a.OpenWorld = *openWorld
	}
	if a.ReadOnly {
		a.Destructive, a.Idempotent = false, true
	}
	return a
}

// AnnotationSelector selects tools by their annotations: every field that is
// set must equal the tool's resolved value. For a call whose annotations are
// unknown (Call.Annotations nil: the server is not trusted) the selector
// takes the strictest reading: it does not hold for an allow rule and holds
// for a deny or approve rule.
type AnnotationSelector struct {
	ReadOnly    *bool `yaml:"read_only,omitempty" json:"read_only,omitempty"`
	Destructive *bool `yaml:"destructive,omitempty" json:"destructive,omitempty"`
	Idempotent  *bool `yaml:"idempotent,omitempty" json:"idempotent,omitempty"`
	OpenWorld   *bool `yaml:"open_world,omitempty" json:"open_world,omitempty"`
}

// empty reports whether no field is set.
func (s *AnnotationSelector) empty() bool {
	return s.ReadOnly == nil && s.Destructive == nil && s.Idempotent == nil && s.OpenWorld == nil
}

// holds reports whether a (known) satisfies s, and if not the first
// mismatching key.
func (s *AnnotationSelector) holds(a *Annotations) (bool, string) {
	check := []struct {
		key  string
		want *bool
		got  bool
	}{
		{"read_only", s.ReadOnly, a.ReadOnly},
		{"destructive", s.Destructive, a.Destructive},
		{"idempotent", s.Idempotent, a.Idempotent},
		{"open_world", s.OpenWorld, a.OpenWorld},
	}
	for _, c := range check {
		if c.want != nil && *c.want != c.got {
			return false, fmt.Sprintf("%s is %v, the rule wants %v", c.key, c.got, *c.want)
		}
	}
	return true, ""
}

// String writes s as "{read_only: true, destructive: false}".
func (s *AnnotationSelector) String() string {
	if s == nil {
		return "{}"
	}
	var parts []string
	add := func(k string, v *bool) {
		if v != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", k, *v))
		}
	}
	add("read_only", s.ReadOnly)
	add("destructive", s.Destructive)
	add("idempotent", s.Idempotent)
	add("open_world", s.OpenWorld)
	return "{" + strings.Join(parts, ", ") + "}"
}

// equal reports whether a and b select the same (nil and empty alike).
func (s *AnnotationSelector) equal(o *AnnotationSelector) bool {
	return s.String() == o.String()
}
