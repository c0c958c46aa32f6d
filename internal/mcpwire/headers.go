package mcpwire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Request headers of the 2026-07-28 Streamable HTTP transport (SEP-2243).
// Header names compare case-insensitively (http.Header canonicalizes them);
// values are case-sensitive.
const (
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderParamPrefix     = "Mcp-Param-"
)

// The Base64 sentinel of header values that are not plain ASCII
// (streamable-http.mdx, "Value Encoding").
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// CheckVersionHeader checks that MCP-Protocol-Version is present and
// equals the request's _meta protocol version: else HeaderMismatch.
func CheckVersionHeader(h http.Header, metaVersion string) *Error {
	v, ok := headerValue(h, HeaderProtocolVersion)
	switch {
	case !ok:
		return Errorf(CodeHeaderMismatch, "missing required %s header", HeaderProtocolVersion)
	case v != metaVersion:
		return Errorf(CodeHeaderMismatch, "header mismatch: %s header %q does not match %s %q in _meta", HeaderProtocolVersion, v, MetaProtocolVersion, metaVersion)
	}
	return nil
}

// CheckHeaders checks Mcp-Method against the body's method and, when named
// is true (tools/call, prompts/get and resources/read name a tool, prompt
// or URI; tasks/get, tasks/update and tasks/cancel a task id), Mcp-Name
// against name, after decoding a Base64 sentinel. A missing, mismatched
// or undecodable header is HeaderMismatch. Nothing is run for a request
// that fails: the body, never a header, decides what runs.
func CheckHeaders(h http.Header, method, name string, named bool) *Error {
	m, ok := headerValue(h, HeaderMethod)
	switch {
	case !ok:
		return Errorf(CodeHeaderMismatch, "missing required %s header", HeaderMethod)
	case m != method:
		return Errorf(CodeHeaderMismatch, "header mismatch: %s header %q does not match the body's method %q", HeaderMethod, m, method)
	}
	if !named {
		return nil
	}
	raw, ok := headerValue(h, HeaderName)
	if !ok {
		return Errorf(CodeHeaderMismatch, "missing required %s header for %s", HeaderName, method)
	}
	v, err := DecodeValue(raw)
	if err != nil {
		return Errorf(CodeHeaderMismatch, "%s header: %v", HeaderName, err)
	}
	if v != name {
		return Errorf(CodeHeaderMismatch, "header mismatch: %s header %q does not match the body's %q", HeaderName, raw, name)
	}
	return nil
}

// headerValue returns the value of header k with optional whitespace
// trimmed (RFC 9110 §5.5), and whether it was sent at all.
func headerValue(h http.Header, k string) (string, bool) {
	vs := h.Values(k)
	if len(vs) == 0 {
		return "", false
	}
	return strings.Trim(vs[0], " \t"), true
}

// DecodeValue decodes a header value that may carry the Base64 sentinel
// "=?base64?…?=". A value without both markers is taken literally; one
// with them whose content is not valid standard Base64 is an error.
func DecodeValue(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, base64Prefix)
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, base64Suffix)
	if !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", errors.New("invalid Base64 in a =?base64?…?= value")
	}
	return string(b), nil
}

// EncodeValue encodes s for a header as a client must: as is when it is
// plain visible ASCII without leading or trailing whitespace and does not
// look like the sentinel, else in the Base64 sentinel.
func EncodeValue(s string) string {
	plain := s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for i := 0; plain && i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			plain = false
		}
	}
	if plain && (!strings.HasPrefix(s, base64Prefix) || !strings.HasSuffix(s, base64Suffix)) {
		return s
	}
	return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
}

// A ParamHeader binds a tool parameter to the Mcp-Param-<Name> header
// that mirrors it: Path is the chain of properties keys from the input
// schema's root to the parameter.
type ParamHeader struct {
	Path []string
	Name string
}

// ParamHeaders returns the x-mcp-header bindings of a tool's input schema
// (streamable-http.mdx, "Custom Headers from Tool Parameters"), sorted by
// header name. An annotation that breaks the rules (empty or not an HTTP
// token, on a non-primitive or number parameter, or a name used twice
// ignoring case) is an error: clients exclude such a tool.
func ParamHeaders(schema json.RawMessage) ([]ParamHeader, error) {
	if len(schema) == 0 {
		return nil, nil
	}
	var root struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, nil // not an object schema: nothing to mirror
	}
	var out []ParamHeader
	seen := map[string]bool{}
	if err := collectParamHeaders(root.Properties, nil, seen, &out); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ParamHeader) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func collectParamHeaders(props map[string]json.RawMessage, prefix []string, seen map[string]bool, out *[]ParamHeader) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var p struct {
			Type       json.RawMessage            `json:"type"`
			Header     json.RawMessage            `json:"x-mcp-header"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(props[k], &p) != nil {
			continue
		}
		path := append(slices.Clone(prefix), k)
		if p.Header != nil {
			var name, typ string
			if json.Unmarshal(p.Header, &name) != nil || name == "" {
				return fmt.Errorf("property %s: x-mcp-header must be a non-empty string", strings.Join(path, "."))
			}
			if !isToken(name) {
				return fmt.Errorf("property %s: x-mcp-header %q is not an HTTP header name token", strings.Join(path, "."), name)
			}
			_ = json.Unmarshal(p.Type, &typ)
			if typ != "string" && typ != "integer" && typ != "boolean" {
				return fmt.Errorf("property %s: x-mcp-header applies only to string, integer and boolean parameters", strings.Join(path, "."))
			}
			if seen[strings.ToLower(name)] {
				return fmt.Errorf("property %s: x-mcp-header %q is used twice", strings.Join(path, "."), name)
			}
			seen[strings.ToLower(name)] = true
			*out = append(*out, ParamHeader{Path: path, Name: name})
		}
		if len(p.Properties) > 0 {
			if err := collectParamHeaders(p.Properties, path, seen, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2, 1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// CheckParamHeaders checks the Mcp-Param-* headers of a tools/call against
// its arguments, for the tool's bindings: a parameter present (not null)
// in the arguments needs its header with an equal value (integers compare
// numerically); an absent or null one must not have it. Anything else is
// HeaderMismatch.
func CheckParamHeaders(h http.Header, bindings []ParamHeader, args json.RawMessage) *Error {
	if len(bindings) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if len(args) > 0 {
		_ = json.Unmarshal(args, &obj)
	}
	for _, b := range bindings {
		header := HeaderParamPrefix + b.Name
		raw, sent := headerValue(h, header)
		body, ok := lookup(obj, b.Path)
		if !ok || bytes.Equal(body, []byte("null")) {
			if sent {
				return Errorf(CodeHeaderMismatch, "header mismatch: %s is sent but parameter %s is absent", header, strings.Join(b.Path, "."))
			}
			continue
		}
		if !sent {
			return Errorf(CodeHeaderMismatch, "missing required %s header for parameter %s", header, strings.Join(b.Path, "."))
		}
		v, err := DecodeValue(raw)
		if err != nil {
			return Errorf(CodeHeaderMismatch, "%s header: %v", header, err)
		}
		if !primitiveEqual(v, body) {
			return Errorf(CodeHeaderMismatch, "header mismatch: %s header %q does not match parameter %s", header, raw, strings.Join(b.Path, "."))
		}
	}
	return nil
}

func lookup(obj map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := obj[path[0]]
	for _, k := range path[1:] {
		if !ok {
			return nil, false
		}
		var next map[string]json.RawMessage
		if json.Unmarshal(cur, &next) != nil {
			return nil, false
		}
		cur, ok = next[k]
	}
	return cur, ok
}

// maxSafe is the largest integer a JavaScript number holds exactly.
const maxSafe = 1<<53 - 1

// primitiveEqual reports whether the decoded header value v equals the
// JSON value body: a string exactly, a boolean as "true"/"false", an
// integer (within ±(2^53−1)) numerically.
func primitiveEqual(v string, body json.RawMessage) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil {
		return false
	}
	switch b := x.(type) {
	case string:
		return v == b
	case bool:
		return v == strconv.FormatBool(b)
	case json.Number:
		want, ok := safeInteger(string(b))
		if !ok {
			return false
		}
		got, ok := safeInteger(v)
		return ok && got == want
	}
	return false
}

func safeInteger(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > maxSafe {
		return 0, false
	}
	return f, true
}
