package mcpwire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantCode int // 0: no error
		wantID   string
		notify   bool
	}{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`, 0, "7", false},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, 0, `"a"`, false},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, 0, "", true},
		{"not json", `{nope`, CodeParseError, "", false},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, CodeInvalidRequest, "", false},
		{"no version", `{"id":1,"method":"tools/list"}`, CodeInvalidRequest, "1", false},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{}}`, CodeInvalidRequest, "1", false},
		{"no method", `{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest, "1", false},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"x"}`, CodeInvalidRequest, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRequest([]byte(tt.body))
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("DecodeRequest: %v", err)
				}
				if r.IsNotification() != tt.notify {
					t.Errorf("IsNotification = %v, want %v", r.IsNotification(), tt.notify)
				}
			} else if err == nil || err.Code != tt.wantCode {
				t.Fatalf("error %v, want code %d", err, tt.wantCode)
			}
			if string(r.ID) != tt.wantID {
				t.Errorf("id %s, want %s", r.ID, tt.wantID)
			}
		})
	}
}

func TestErrorStatus(t *testing.T) {
	for code, want := range map[int]int{
		CodeMethodNotFound: 404, CodeInvalidParams: 400, CodeHeaderMismatch: 400,
		CodeMissingCapability: 400, CodeUnsupportedVersion: 400, CodeInternalError: 200, -32010: 200,
	} {
		if got := (&Error{Code: code}).Status(); got != want {
			t.Errorf("code %d: status %d, want %d", code, got, want)
		}
	}
}

func TestEncode(t *testing.T) {
	got := string(EncodeResult(json.RawMessage(`"x"`), json.RawMessage(`{"a":1}`)))
	if got != `{"jsonrpc":"2.0","id":"x","result":{"a":1}}` {
		t.Errorf("EncodeResult = %s", got)
	}
	got = string(EncodeError(nil, Errorf(CodeParseError, "bad")))
	if got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}` {
		t.Errorf("EncodeError = %s", got)
	}
	e := Errorf(CodeUnsupportedVersion, "no").WithData(map[string]any{"supported": []string{Version}})
	if got := string(EncodeError(json.RawMessage(`1`), e)); !strings.Contains(got, `"data":{"supported":["2026-07-28"]}`) {
		t.Errorf("EncodeError with data = %s", got)
	}
}

func TestParseMeta(t *testing.T) {
	ok := `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/logLevel":"debug","progressToken":5}}`
	m, err := ParseMeta(json.RawMessage(ok))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Capabilities
	if m.ProtocolVersion != Version || m.LogLevel != "debug" || string(m.ProgressToken) != "5" ||
		!c.ElicitationURL || c.ElicitationForm || !c.Has(TasksExtension) || c.Sampling || c.Roots {
		t.Errorf("ParseMeta = %+v", m)
	}
	empty, err := ParseMeta(json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{"tools":{}},"roots":{}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := empty.Capabilities; !c.ElicitationForm || c.ElicitationURL || !c.SamplingTools || !c.Roots || c.Has(TasksExtension) {
		t.Errorf("empty elicitation object: %+v", c)
	}
	for name, params := range map[string]string{
		"no params":       ``,
		"no meta":         `{}`,
		"no version":      `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`,
		"no capabilities": `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		"bad token":       `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":{}}}`,
	} {
		if _, err := ParseMeta(json.RawMessage(params)); err == nil || err.Code != CodeInvalidParams {
			t.Errorf("%s: error %v, want invalid params", name, err)
		}
	}
}

func TestLogWanted(t *testing.T) {
	if LogWanted("", "emergency") {
		t.Error("no logLevel: a request gets no log messages")
	}
	if !LogWanted("warning", "error") || LogWanted("warning", "info") || !LogWanted("debug", "debug") {
		t.Error("level order")
	}
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestCheckHeaders(t *testing.T) {
	tests := []struct {
		name   string
		h      http.Header
		method string
		body   string
		named  bool
		ok     bool
	}{
		{"match", header("Mcp-Method", "tools/call", "Mcp-Name", "fs__read"), "tools/call", "fs__read", true, true},
		{"lowercase header names", header("mcp-method", "tools/list"), "tools/list", "", false, true},
		{"whitespace around the value", header("Mcp-Method", "tools/call", "Mcp-Name", "  fs__read\t"), "tools/call", "fs__read", true, true},
		{"base64 name", header("Mcp-Method", "resources/read", "Mcp-Name", EncodeValue("file:///ü")), "resources/read", "file:///ü", true, true},
		{"name mismatch", header("Mcp-Method", "tools/call", "Mcp-Name", "fs__read"), "tools/call", "fs__write", true, false},
		{"missing name", header("Mcp-Method", "tools/call"), "tools/call", "fs__write", true, false},
		{"missing method", header("Mcp-Name", "x"), "tools/list", "", false, false},
		{"method case", header("Mcp-Method", "TOOLS/LIST"), "tools/list", "", false, false},
		{"bad base64", header("Mcp-Method", "tools/call", "Mcp-Name", "=?base64?!!?="), "tools/call", "x", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckHeaders(tt.h, tt.method, tt.body, tt.named)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckHeaders = %v, want ok %v", err, tt.ok)
			}
			if err != nil && err.Code != CodeHeaderMismatch {
				t.Errorf("code %d, want %d", err.Code, CodeHeaderMismatch)
			}
		})
	}
}

func TestCheckVersionHeader(t *testing.T) {
	if err := CheckVersionHeader(header("MCP-Protocol-Version", Version), Version); err != nil {
		t.Error(err)
	}
	if err := CheckVersionHeader(header(), Version); err == nil || err.Code != CodeHeaderMismatch {
		t.Errorf("missing: %v", err)
	}
	if err := CheckVersionHeader(header("Mcp-Protocol-Version", LegacyVersion), Version); err == nil || err.Code != CodeHeaderMismatch {
		t.Errorf("mismatch: %v", err)
	}
}

func TestValueEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"us-west1":           "us-west1",
		"Hello, 世界":          "=?base64?SGVsbG8sIOS4lueVjA==?=",
		" padded ":           "=?base64?IHBhZGRlZCA=?=",
		"line1\nline2":       "=?base64?bGluZTEKbGluZTI=?=",
		"=?base64?literal?=": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
	} {
		got := EncodeValue(in)
		if got != want {
			t.Errorf("EncodeValue(%q) = %q, want %q", in, got, want)
		}
		back, err := DecodeValue(got)
		if err != nil || back != in {
			t.Errorf("DecodeValue(%q) = %q, %v", got, back, err)
		}
	}
	for _, literal := range []string{"=?base64?abc", "abc?=", "plain"} {
		if v, err := DecodeValue(literal); err != nil || v != literal {
			t.Errorf("DecodeValue(%q) = %q, %v: want it literal", literal, v, err)
		}
	}
	if _, err := DecodeValue("=?base64?SGVsbG8?="); err == nil {
		t.Error("missing padding must not decode")
	}
}

const schema = `{"type":"object","properties":{
	"region":{"type":"string","x-mcp-header":"Region"},
	"count":{"type":"integer","x-mcp-header":"Count"},
	"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}},
	"query":{"type":"string"}}}`

func TestParamHeaders(t *testing.T) {
	bs, err := ParamHeaders(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bs {
		got = append(got, b.Name+"="+strings.Join(b.Path, "."))
	}
	if want := "Count=count Dry=opts.dry Region=region"; strings.Join(got, " ") != want {
		t.Errorf("bindings %v, want %s", got, want)
	}
	for name, bad := range map[string]string{
		"number":    `{"properties":{"x":{"type":"number","x-mcp-header":"X"}}}`,
		"empty":     `{"properties":{"x":{"type":"string","x-mcp-header":""}}}`,
		"not token": `{"properties":{"x":{"type":"string","x-mcp-header":"a b"}}}`,
		"duplicate": `{"properties":{"x":{"type":"string","x-mcp-header":"A"},"y":{"type":"string","x-mcp-header":"a"}}}`,
	} {
		if _, err := ParamHeaders(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestCheckParamHeaders(t *testing.T) {
	bs, err := ParamHeaders(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	base := func(kv ...string) http.Header { return header(kv...) }
	tests := []struct {
		name string
		h    http.Header
		args string
		ok   bool
	}{
		{"all match", base("Mcp-Param-Region", "us-west1", "Mcp-Param-Count", "42", "Mcp-Param-Dry", "true"), `{"region":"us-west1","count":42.0,"opts":{"dry":true},"query":"q"}`, true},
		{"absent params", base(), `{"query":"q"}`, true},
		{"null param", base(), `{"region":null}`, true},
		{"base64 value", base("Mcp-Param-Region", EncodeValue("Hello, 世界")), `{"region":"Hello, 世界"}`, true},
		{"header for absent", base("Mcp-Param-Region", "x"), `{}`, false},
		{"missing header", base(), `{"region":"x"}`, false},
		{"mismatch", base("Mcp-Param-Region", "eu"), `{"region":"us"}`, false},
		{"integer mismatch", base("Mcp-Param-Count", "41"), `{"count":42}`, false},
		{"unsafe integer", base("Mcp-Param-Count", "9007199254740993"), `{"count":9007199254740993}`, false},
		{"bad base64", base("Mcp-Param-Region", "=?base64?%%?="), `{"region":"x"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckParamHeaders(tt.h, bs, json.RawMessage(tt.args))
			if (err == nil) != tt.ok {
				t.Fatalf("CheckParamHeaders = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestWriteEvent(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteEvent(&buf, []byte("{\n \"a\": 1\n}")); err != nil {
		t.Fatal(err)
	}
	want := "event: message\ndata: {\ndata:  \"a\": 1\ndata: }\n\n"
	if buf.String() != want {
		t.Errorf("WriteEvent = %q, want %q", buf.String(), want)
	}
}
