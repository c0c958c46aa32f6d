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
	deep := bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) > maxScanDepth
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

// rawAnswerSeeds are answer lines for TestScanRawAnswerIsTheDecode.
var rawAnswerSeeds = []string{
	`{"jsonrpc":"2.0","id":"tg-1","result":{"content":[{"type":"text","text":"a"}]}}`,
	`{"id":"tg-1","result":{},"jsonrpc":"2.0"}`,
	` {"jsonrpc" : "2.0" , "id" : "tg-1" , "result" : { "a" : [1, 2] } , "error" : null } `,
	`{"jsonrpc":"2.0","id":"tg-1","result":{"a":1},"error":{"code":1,"message":"x"}}`,
	`{"jsonrpc":"2.0","id":"tg-1","error":{"code":-32000,"message":"boom","data":[1]}}`,
	`{"jsonrpc":"2.0","id":"tg-1","result":{"a":1},"Result":{"b":2}}`,
	`{"jsonrpc":"2.0","id":"tg-1","RESULT":{"b":2}}`,
	`{"jsonrpc":"2.0","id":"tg-1","result":{"a":1},"ERROR":{"code":1,"message":"x"}}`,
	`{"JSONRPC":"2.0","id":"tg-1","result":{}}`,
	`{"jsonrpc":"2.0","jsonrpc":"1.0","id":"tg-1","result":{}}`,
	`{"jsonrpc":"2.0","id":"tg-1","result":{"a":1},"result":{"a":2}}`,
	`{"jsonrpc":"2\u002e0","id":"tg-1","result":{}}`,
	`{"jsonrpc":"2.0","id":"tg-1","r\u0065sult":{"a":1}}`,
	`{"jsonrpc":2,"id":"tg-1","result":{}}`,
	`{"jsonrpc":"2.0","id":"tg-1","result":[]}`,
	`{"jsonrpc":"2.0","id":"tg-1","result":null}`,
	`{"jsonrpc":"2.0","id":"tg-1"}`,
	`{"jsonrpc":"2.0","id":"tg-1","result":{}`,
	`{"jsonrpc":"2.0","id":"tg-1","result":{}} x`,
	`[{"jsonrpc":"2.0","id":"tg-1","result":{}}]`,
	"{\"jsonrpc\":\"2.0\",\"id\":\"tg-1\",\"re\u017fult\":{}}",
	`{"jsonrpc":"2.0","id":"tg-1","result":{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`,
}

// checkRawAnswer fails t when scanRawAnswer answers line other than the
// decode (parseRawAnswerDecoded) does.
func checkRawAnswer(t *testing.T, line []byte) {
	t.Helper()
	r, ok := scanRawAnswer(line)
	if !ok {
		return
	}
	d, why := parseRawAnswerDecoded(line)
	if why != "" || d.err != nil || !bytes.Equal(d.result, r) {
		t.Errorf("%s: the scanner answers result %s, the decode %s (err %v, %s)", line, r, d.result, d.err, why)
	}
}

// TestScanRawAnswerIsTheDecode: an answer line's result is read by the
// scanner with one allocation (the copy of the result; the decode made
// 7) and always as the decode reads it; a line with anything but a
// result object is left to the decode.
func TestScanRawAnswerIsTheDecode(t *testing.T) {
	for _, s := range rawAnswerSeeds {
		checkRawAnswer(t, []byte(s))
	}
	line := []byte(rawAnswerSeeds[0])
	if _, ok := scanRawAnswer(line); !ok {
		t.Fatal("the scanner leaves a plain answer line to the decode")
	}
	if n := testing.AllocsPerRun(100, func() {
		if a, why := parseRawAnswer(line); why != "" || a.err != nil {
			t.Fatal(why, a.err)
		}
	}); n > 1 {
		t.Errorf("parseRawAnswer allocated %v times, want at most 1", n)
	}
}

// FuzzScanRawAnswer is TestScanRawAnswerIsTheDecode on generated lines.
func FuzzScanRawAnswer(f *testing.F) {
	for _, s := range rawAnswerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkRawAnswer(t, line)
	})
}
