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

// sseResult is the data of the one SSE message event in a (a 2026-07-28
// answer as writeModernResult writes it).
func sseResult(t *testing.T, a []byte) []byte {
	t.Helper()
	_, data, ok := bytes.Cut(a, []byte("data: "))
	if !ok {
		t.Fatalf("no data line in %q", a)
	}
	return bytes.TrimSpace(data)
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
		data := sseResult(t, w.Body.Bytes())
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
