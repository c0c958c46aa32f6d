package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// scanSeeds are JSON texts, valid and not, for the scanner's tests.
var scanSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"x\"y\\u00e9\n"}`,
	`{"a":-0.5e+10,"b":true,"c":false,"d":null,"e":""}`, `{"a":01}`, `{"a":1.}`,
	`{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":tru}`, `{"a":"\x"}`, `{"a":"\u12"}`,
	"{\"a\":\"\x01\"}", `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":1}}`, `{"a":1} x`,
	`{"a":[1,]}`, `{"a":[,1]}`, `{"a":[}`, `[]`, `"x"`, `1`, ``, `{`, `{"a":{"b":{"c":[[]]}}}`,
	"{\"a\":\"<&>\u2028\u2029\"}", `{"a" : [ 1 , 2 ] , "b" : { "c" : "d" } }`,
	`{"a":"` + strings.Repeat("[", 10) + `"}`, `{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
}

// checkScan fails t when the scanner's reading of b disagrees with
// encoding/json: a whole object is valid exactly when json.Valid says so
// (unless it nests deeper than the scanner follows), and each member's
// value, compacted by appendCompactHTML, is what json.Compact and
// json.HTMLEscape make of it.
func checkScan(t *testing.T, b []byte) {
	t.Helper()
	m := scanMembers(b, 0, true)
	var vals [][]byte
	for {
		k, _, v, more := m.next()
		if !more {
			break
		}
		if !json.Valid(k) {
			t.Fatalf("%q: key %q is not a JSON string", b, k)
		}
		vals = append(vals, v)
	}
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	want := json.Valid(b) && len(trimmed) > 0 && trimmed[0] == '{'
	deep := bytes.Count(b, []byte("[")) + bytes.Count(b, []byte("{")) > maxScanDepth
	if m.bad == want && (!m.bad || !deep) {
		t.Fatalf("%q: scanner valid %v, json.Valid and an object %v", b, !m.bad, want)
	}
	if m.bad {
		return
	}
	for _, v := range vals {
		var c, h bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			t.Fatalf("%q: member value %q: %v", b, v, err)
		}
		json.HTMLEscape(&h, c.Bytes())
		if got := appendCompactHTML(nil, v); !bytes.Equal(got, h.Bytes()) {
			t.Errorf("%q: appendCompactHTML(%q) = %q, want %q", b, v, got, h.Bytes())
		}
	}
}

// TestScanMembersIsEncodingJSONsValidity: the scanner accepts exactly
// the JSON objects encoding/json accepts and compacts member values as
// encoding/json writes a json.RawMessage.
func TestScanMembersIsEncodingJSONsValidity(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
}

// FuzzScanMembers is TestScanMembersIsEncodingJSONsValidity on generated
// input (go test -run '^$' -fuzz FuzzScanMembers -fuzztime 30s).
func FuzzScanMembers(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkScan(t, b)
	})
}
