package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// duplicateKeys returns the object keys that occur more than once in one
// object anywhere in the JSON value b (as decoded, escapes resolved), or
// an error when b is not one JSON value. A strict reader (encoding/json/v2
// by default) rejects such a document; encoding/json keeps the last.
func duplicateKeys(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var dups []string
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				ks, _ := k.(string)
				if seen[ks] {
					dups = append(dups, ks)
				}
				seen[ks] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return dups, nil
}

// answerMessage is the one JSON-RPC message of a (a 2026-07-28 answer as
// writeModernResult writes it: the message alone, as application/json).
func answerMessage(t *testing.T, a []byte) []byte {
	t.Helper()
	if !json.Valid(a) {
		t.Fatalf("answer %q is not one JSON message", a)
	}
	return a
}

// TestModernAnswerOfADecodedResultHasOneResultType: a result a 2026-era
// upstream sent with its own resultType, decoded (decodeRawForModern on
// the raw path, the SDK's CallTool on the SDK path: both keep the
// upstream's resultType in the result), is answered with one resultType
// member, toolgate's. Before the fix the answer carried the upstream's
// resultType and then toolgate's ("resultType":"complete" twice, or the
// upstream's "x" before "complete"), a document strict readers reject and
// lenient ones read either way.
func TestModernAnswerOfADecodedResultHasOneResultType(t *testing.T) {
	impl := &mcp.Implementation{Name: "toolgate", Version: "t"}
	for _, raw := range []string{
		`{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}],"resultType":"complete"}`,
		`{"content":[{"type":"text","text":"a","annotations":{"priority":1}}],"resultType":"complete"}`,
		`{"content":[{"type":"text","text":"a"}],"resultType":"something_else"}`,
	} {
		res, err := decodeRawForModern(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		w := httptest.NewRecorder()
		writeModernResult(w, impl, json.RawMessage(`7`), res, nil)
		data := answerMessage(t, w.Body.Bytes())
		dups, err := duplicateKeys(data)
		if err != nil || len(dups) != 0 {
			t.Errorf("answer to %s: %s: duplicate keys %v (%v)", raw, data, dups, err)
		}
		var m struct {
			Result struct {
				ResultType string `json:"resultType"`
			} `json:"result"`
		}
		if err := json.Unmarshal(data, &m); err != nil || m.Result.ResultType != "complete" {
			t.Errorf("answer to %s: resultType %q (%v), want complete", raw, m.Result.ResultType, err)
		}
	}
}

// TestAnswerResultCopiesEveryExportedField guards answerResult's field by
// field copy: a field the SDK adds to CallToolResult must be copied too.
func TestAnswerResultCopiesEveryExportedField(t *testing.T) {
	typ := reflect.TypeFor[mcp.CallToolResult]()
	var names []string
	for i := range typ.NumField() {
		if typ.Field(i).IsExported() {
			names = append(names, typ.Field(i).Name)
		}
	}
	want := []string{"Meta", "Content", "StructuredContent", "IsError", "InputRequests", "RequestState"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("mcp.CallToolResult's exported fields are %v, answerResult copies %v: copy the new ones", names, want)
	}
}

// sdkPathResultJSON is the result object the SDK path answers a lean
// 2026-07-28 call with, for the raw result object raw an upstream sent
// (its server info dropped or not): the SDK's decode of the result with
// structuredContent and _meta kept raw (callOnce: withRawNumbers, or
// decodeResult when the SDK cannot decode it), encoded as
// writeModernResult encodes it, before resultType. isError is the
// decoded result's, from which the SDK path records its outcome.
func sdkPathResultJSON(raw json.RawMessage, impl *mcp.Implementation) (b []byte, isError bool, err error) {
	var r mcp.CallToolResult
	var res *mcp.CallToolResult
	if json.Unmarshal(raw, &r) == nil {
		res, err = withRawNumbers(&r, raw)
	} else {
		res, err = decodeResult(raw)
	}
	if err != nil {
		return nil, false, err
	}
	b, err = json.Marshal(withServerInfo(answerResult(res), impl))
	return b, res.IsError, err
}

// rawResultSeeds are upstream results that try plainRawResult: escapes,
// surrogates, repeated and escaped keys, keys encoding/json matches
// case-insensitively (the SDK's decoder does not), nulls, wrong types,
// huge numbers, whitespace, another resultType.
var rawResultSeeds = []string{
	`{"content":[{"type":"text","text":"a"}]}`,
	`{"content":[{"type":"text","text":"a"}],"isErr\u006fr":true}`,
	`{"content":[{"type":"text","text":"a"}],"\u005fmeta":{"x":1}}`,
	`{"c\u006fntent":[{"type":"text","text":"a"}]}`,
	`{"content":[{"type":"text","t\u0065xt":"a"}]}`,
	`{"content":[{"t\u0079pe":"text","text":"a"}]}`,
	`{"content":[{"type":"t\u0065xt","text":"a"}]}`,
	`{"content":[{"type":"text","text":"a"}],"isError":true,"isError":false}`,
	`{"content":[{"type":"text","text":"a"}],"isError":false,"isError":true}`,
	`{"content":[{"type":"text","text":"a","text":"b"}]}`,
	`{"content":[{"type":"text","type":"text","text":"a"}]}`,
	`{"content":[{"type":"text","text":"a"}],"content":[{"type":"text","text":"b"}]}`,
	`{"content":[{"type":"text","text":"a"}],"structuredContent":{"a":1},"structuredContent":null}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{"a":1},"_meta":null}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{"a":1,"a":2}}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{"b":1,"a!":2,"a":3,"z":{"y":[1, 2]},"<&>":"\u2028<"}}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{"a":1,"a":2}}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{"j":1}}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{}}`,
	"{\"content\":[{\"type\":\"text\",\"text\":\"\u2028 \u2029 <a&b>\"}],\"structuredContent\":{\"s\":\"\u2028<\"}}",
	`{"content":[{"type":"text","text":"a"},{"text":"b","type":"text"},{"type":"text","text":""}],"structuredContent":{ "a" : [ 1 , 2.5e-3 , -0 , true , false , null , "x\"y" ] },"isError":false}`,
	`{"content":[],"structuredContent":null,"_meta":null,"resultType":"complete"}`,
	`{"content":[{"type":"text","text":"a"}]} `,
	`{"content":[{"type":"text","text":"a"}]}}`,
	`{"content":[{"type":"text","text":"a"}],}`,
	`{"content":[{"type":"text","text":"a"},]}`,
	`{"content":[{"type":"text","text":"a"}],"structuredContent":01}`,
	`{"content":[{"type":"text","text":"a"}],"structuredContent":[1,]}`,
	`{"content":[{"type":"text","text":"a"}],"structuredContent":"\x"}`,
	`{"content":[{"type":"text","text":"a"}],"structuredContent":tru}`,
	`{"content":[{"type":"text","text":"a\u00e9"}],"structuredContent":1.}`,
	`{"content":[{"type":"text","text":"\ud800 \u00e9 <>& \u2028"}]}`,
	`{"content":[{"type":"text","text":"\udc00\ud83d\ude00\ud83d"}]}`,
	`{"content":[{"type":"text","text":"\\u0041 \" \n\t"}]}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{"io.modelcontextprotocol\/serverInfo":{"name":"up"}}}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"},"k":{"io.modelcontextprotocol/serverInfo":1}}}`,
	`{"content":[{"type":"text","text":"a"}],"structuredContent":1e400,"_meta":{"n":123456789012345678901234567890}}`,
	`{"content":[{"type":"text","text":"a"}],"structuredContent":{"a":[[[[[[[[[[{"b":null}]]]]]]]]]]}}`,
	`{"content":[{"type":"text","text":"a"}],"StructuredContent":{"a":1}}`,
	`{"content":[{"type":"text","text":"a"}],"_Meta":{"a":1}}`,
	`{"content":[{"type":"text","text":"a"}],"IsError":true}`,
	`{"Content":[{"type":"text","text":"a"}]}`,
	`{"content":[{"type":"text","text":"a"}],"resultType":"input_required"}`,
	`{"content":[{"type":"text","text":"a"}],"resultType":"complete","resultType":"x"}`,
	`{"content":[{"type":"text","text":"a"}],"resultType":"x","resultType":"complete"}`,
	`{"content":[],"isError":true}`,
	`{"content":null}`,
	`{}`,
	`{"content":[{"type":"text","text":"a"}],"isError":"true"}`,
	`{"content":[{"type":"text","text":"a"}],"isError":null}`,
	`{"content":[{"text":"a","type":"text"}]}`,
	`{"content":[{"type":"text","text":null}]}`,
	`{"content":[null]}`,
	"{\"content\" : [ {\"type\":\"text\",\n\"text\":\"a\"} ] , \"isError\" :\ttrue }",
	"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}",
}

// checkPlainRawResult fails t when plainRawResult answers raw other than
// the SDK path does: a plain result's JSON must be the SDK path's (same
// bytes unless a text has an escape the SDK writes as the character),
// with no repeated key, and its isError (the recorded outcome) the SDK
// path's; a result the SDK path cannot read is never plain.
func checkPlainRawResult(t *testing.T, raw []byte) {
	t.Helper()
	impl := &mcp.Implementation{Name: "toolgate", Version: "t"}
	want, wantErr, werr := sdkPathResultJSON(raw, impl)
	got, gotErr, plain := plainRawResult(raw, impl)
	ij, err := json.Marshal(impl)
	if err != nil {
		t.Fatal(err)
	}
	// The scanner answers exactly as the decode (plainRawResultDecode)
	// whenever it answers.
	if sb, sErr, ok := scanPlainResult(raw, ij); ok {
		db, dErr, dplain := plainRawResultDecode(raw, impl)
		if !dplain || !bytes.Equal(sb, db) || sErr != dErr {
			t.Errorf("%s: the scanner answers %s (isError %v), the decode %s (isError %v, plain %v)", raw, sb, sErr, db, dErr, dplain)
		}
	}
	if !plain {
		return
	}
	if werr != nil {
		t.Fatalf("%s: plain (%s), but the SDK path cannot read it: %v", raw, got, werr)
	}
	if gotErr != wantErr {
		t.Errorf("%s: isError %v, the SDK path's %v", raw, gotErr, wantErr)
	}
	if dups, err := duplicateKeys(got); err != nil || len(dups) != 0 {
		t.Errorf("%s: answered %s: repeated keys %v (%v)", raw, got, dups, err)
	}
	if a, b := decodeNumbers(want), decodeNumbers(got); a == nil || !reflect.DeepEqual(a, b) {
		t.Errorf("%s:\n raw path %s\n SDK path %s", raw, got, want)
	}
	if !bytes.Contains(raw, []byte(`\/`)) && !bytes.Equal(got, want) {
		t.Errorf("%s: bytes differ:\n raw path %s\n SDK path %s", raw, got, want)
	}
}

// decodeNumbers decodes the JSON b with numbers kept as written (nil when
// b is not JSON).
func decodeNumbers(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// TestPlainRawResultIsTheSDKPathsJSON: for each seed, a plain raw result
// is answered with the JSON and outcome the SDK path gives it. Before the
// fix, content items went out as they came: a repeated "text" key
// ({"type":"text","text":"a","text":"b"}: the SDK path writes "b" once),
// keys in another order or escaped, and escaped lone surrogates (the SDK
// path writes U+FFFD; strict readers reject \ud800).
func TestPlainRawResultIsTheSDKPathsJSON(t *testing.T) {
	for _, raw := range rawResultSeeds {
		checkPlainRawResult(t, []byte(raw))
	}
}

// FuzzPlainRawResult is TestPlainRawResultIsTheSDKPathsJSON on generated
// results (go test -run '^$' -fuzz FuzzPlainRawResult -fuzztime 30s).
func FuzzPlainRawResult(f *testing.F) {
	for _, raw := range rawResultSeeds {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkPlainRawResult(t, raw)
	})
}

// TestPlainRawResultScansTheEchoResult: the perf harness's echo result
// (one text item, structuredContent, _meta) is answered by the scanner
// with one allocation (the answer) when the server info's JSON is at hand
// (Gateway.implJSON), and as the decode answers it. The decode
// (plainRawResultDecode, the only path before) made about 50.
func TestPlainRawResultScansTheEchoResult(t *testing.T) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"Echo: ` + string(bytes.Repeat([]byte("x"), 100)) + `"}],"structuredContent":{"n":1},"_meta":{"k":"v"}}`)
	impl := &mcp.Implementation{Name: "toolgate", Version: "t"}
	ij, err := json.Marshal(impl)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := scanPlainResult(raw, ij); !ok {
		t.Fatal("the scanner leaves the echo result to the decode")
	}
	want, _, _ := plainRawResultDecode(raw, impl)
	if got, _, plain := plainRawResultWith(raw, impl, ij); !plain || !bytes.Equal(got, want) {
		t.Fatalf("got %s (plain %v), want %s", got, plain, want)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, _, plain := plainRawResultWith(raw, impl, ij); !plain {
			t.Fatal("not plain")
		}
	}); n > 1 {
		t.Errorf("plainRawResultWith allocated %v times per call, want at most 1", n)
	}
}

// BenchmarkPlainRawResult is plainRawResult on the perf harness's echo
// result (one text item of about 100 bytes, structuredContent, _meta).
func BenchmarkPlainRawResult(b *testing.B) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"Echo: ` + string(bytes.Repeat([]byte("x"), 100)) + `"}],"structuredContent":{"n":1},"_meta":{"k":"v"}}`)
	impl := &mcp.Implementation{Name: "toolgate", Version: "t"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, plain := plainRawResult(raw, impl); !plain {
			b.Fatal("not plain")
		}
	}
}
