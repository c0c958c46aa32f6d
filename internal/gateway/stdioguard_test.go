package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestStdinGuard(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`garbage`,
		`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		``,
		`{"foo":1}`,
		`"just a string"`,
		strings.Repeat("x", 100),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	g := newStdinGuard(strings.NewReader(in), newLockedWriter(nopCloser{&out}, 0), 64, func() {}, nil)
	passed, err := io.ReadAll(g)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	if string(passed) != want {
		t.Errorf("passed on:\n%s\nwant:\n%s", passed, want)
	}
	errs := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantCodes := []string{"-32700", "-32600", "-32600", "-32600", "-32600"}
	if len(errs) != len(wantCodes) {
		t.Fatalf("error lines:\n%s\nwant %d", out.String(), len(wantCodes))
	}
	for i, code := range wantCodes {
		if !strings.Contains(errs[i], `"code":`+code) || !strings.Contains(errs[i], `"id":null`) {
			t.Errorf("error line %d = %s, want code %s and id null", i, errs[i], code)
		}
	}
	if !strings.Contains(errs[4], "exceeds limits.max_request_bytes (64 bytes)") {
		t.Errorf("the long line's error = %s, want it to name the limit", errs[4])
	}
}

func TestAllowedOrigin(t *testing.T) {
	for _, tt := range []struct {
		origin, host string
		want         bool
	}{
		{"http://localhost:3000", "127.0.0.1:7070", true},
		{"http://127.0.0.1:9", "127.0.0.1:7070", true},
		{"http://[::1]:9", "127.0.0.1:7070", true},
		{"https://gw.example.com", "gw.example.com", true},
		{"https://GW.example.com", "gw.example.com:443", true},
		{"http://evil.example", "127.0.0.1:7070", false},
		{"http://127.0.0.1.evil.example", "127.0.0.1:7070", false},
		{"null", "127.0.0.1:7070", false},
	} {
		if got := allowedOrigin(tt.origin, tt.host); got != tt.want {
			t.Errorf("allowedOrigin(%q, %q) = %v, want %v", tt.origin, tt.host, got, tt.want)
		}
	}
}

func TestCheckMessage(t *testing.T) {
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	for _, tt := range []struct {
		name, line string
		code       int64  // 0: passed on
		id         string // the id of the answer
		msg        string // part of the message
	}{
		{name: "request", line: `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{name: "string id", line: `{"jsonrpc":"2.0","id":"a-1","method":"ping","params":{}}`},
		{name: "largest safe id", line: `{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"}`},
		{name: "notification", line: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{name: "null id notification", line: `{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`},
		// attack30: the SDK took it for a notification of a request
		// method: on stdio no answer at all (the client waits forever),
		// on HTTP a 400 in plain text.
		{name: "null id request", line: `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, code: -32600, id: "null", msg: "a request's id must be a string or an integer, not null"},
		{name: "response", line: `{"jsonrpc":"2.0","id":3,"result":{}}`},
		{name: "error response", line: `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}`},
		{name: "deep nesting", line: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + deep + `}}`, code: -32600, id: "null", msg: "deeper than 1000"},
		{name: "object id", line: `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, code: -32600, id: "null", msg: "the id must be"},
		{name: "boolean id", line: `{"jsonrpc":"2.0","id":true,"method":"ping"}`, code: -32600, id: "null", msg: "the id must be"},
		{name: "id 1e400", line: `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, code: -32600, id: "1e400", msg: "cannot be kept exactly"},
		{name: "huge id", line: `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, code: -32600, id: "9007199254740993", msg: "cannot be kept exactly"},
		{name: "fraction id", line: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, code: -32600, id: "1.5", msg: "cannot be kept exactly"},
		{name: "stray error member", line: `{"jsonrpc":"2.0","id":2,"method":"ping","error":"boom"}`, code: -32600, id: "2", msg: "must not have a result or error"},
		{name: "error not an object", line: `{"jsonrpc":"2.0","id":2,"error":"boom"}`, code: -32600, id: "2", msg: "error member must be an object"},
		{name: "result and error", line: `{"jsonrpc":"2.0","id":2,"result":{},"error":{"code":1,"message":"x"}}`, code: -32600, id: "2", msg: "exactly one of result and error"},
		{name: "response without id", line: `{"jsonrpc":"2.0","result":{}}`, code: -32600, id: "null", msg: "neither a method nor an id"},
		{name: "method not a string", line: `{"jsonrpc":"2.0","id":4,"method":7}`, code: -32600, id: "4", msg: "method must be a string"},
		{name: "params not structured", line: `{"jsonrpc":"2.0","id":4,"method":"ping","params":"x"}`, code: -32600, id: "4", msg: "params must be"},
		{name: "wrong version", line: `{"jsonrpc":"1.0","id":4,"method":"ping"}`, code: -32600, id: "4", msg: `"jsonrpc": "2.0" is required`},
		{name: "case-folded key is not the key", line: `{"jsonrpc":"2.0","ID":4,"method":"ping"}`},
		{name: "garbage", line: `garbage`, code: -32700, id: "null", msg: "parse error: the line is not valid JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := checkMessage([]byte(tt.line))
			if tt.code == 0 {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil {
				t.Fatal("passed on")
			}
			var got struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(errorLine(e), &got); err != nil {
				t.Fatal(err)
			}
			if got.Error.Code != tt.code || string(got.ID) != tt.id || !strings.Contains(got.Error.Message, tt.msg) {
				t.Errorf("answer id %s, code %d, %q; want id %s, code %d, message with %q", got.ID, got.Error.Code, got.Error.Message, tt.id, tt.code, tt.msg)
			}
		})
	}
}

func TestIDScanner(t *testing.T) {
	for _, tt := range []struct {
		in     string
		id     string
		method bool
	}{
		{`{"jsonrpc":"2.0","id":17,"result":{"x":"a\"b}"}}`, "17", false},
		{`{"result":{"id":99,"nested":[{"id":1}]},"jsonrpc":"2.0","id":"q"}`, `"q"`, false},
		{`{ "id" : { "a" : 1 } , "method":"x"}`, `{ "a" : 1 }`, true},
		{`{"params":{"method":1},"id":5}`, "5", false},
		{`{"i\"d":1,"id":2}`, "2", false},
		{`{"result":"` + strings.Repeat("z", 1000) + `"}`, "", false},
	} {
		var s idScanner
		// Byte by byte, and in one piece.
		for _, c := range []byte(tt.in) {
			s.feed([]byte{c})
		}
		var whole idScanner
		whole.feed([]byte(tt.in))
		for _, got := range []idScanner{s, whole} {
			if string(got.id) != tt.id || got.method != tt.method {
				t.Errorf("%s: id %q method %v; want %q %v", tt.in, got.id, got.method, tt.id, tt.method)
			}
		}
	}
}

// TestSDKDecodable checks sdkDecodable against the SDK's own
// jsonrpc.DecodeMessage, which it stands in for on every upstream line.
func TestSDKDecodable(t *testing.T) {
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
		`{"jsonrpc":"2.0","id":1e400,"result":{}}`,
		`{"jsonrpc":"2.0","id":-3,"error":{"code":-32000,"message":"x","data":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":1.5,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":"1","message":"x"}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":2}}`,
		`{"jsonrpc":"2.0","id":3,"error":"boom"}`,
		`{"jsonrpc":"2.0","id":3,"error":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":3,"error":{}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"},"result":{}}`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":{"a":1},"result":{}}`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`,
		`{"jsonrpc":"2.0","id":[1],"result":{}}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`{"jsonrpc":2,"id":1,"result":{}}`,
		`{"id":1,"result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":[1,2]}`,
		`{"jsonrpc":"2.0","method":"ping","id":7}`,
		`{"jsonrpc":"2.0","method":5,"id":7}`,
		`{"jsonrpc":"2.0","method":"","id":7}`,
		`{"jsonrpc":"2.0","method":null,"id":7}`,
		`{"jsonrpc":"2.0","method":"x","id":7,"error":"stray"}`,
		`{"jsonrpc":"2.0","id":1,"result":` + deep + `}`,
		`{"jsonrpc":"2.0","id":1,"result":{"s":"` + strings.Repeat("[", 1001) + `"}}`,
		`{"jsonrpc":"2.0","ID":1,"result":{}}`,
	} {
		_, sdkErr := jsonrpc.DecodeMessage([]byte(line))
		ours := sdkDecodable([]byte(line))
		if (sdkErr == nil) != (ours == nil) {
			t.Errorf("%.80s: DecodeMessage %v, sdkDecodable %v", line, sdkErr, ours)
		}
	}
}

// TestStdoutGuard feeds a stdio upstream's stdout through the guard: valid
// messages pass unchanged; garbage is skipped; a response the SDK could not
// decode, and a response over the limit, become error responses to their
// ids (only those calls fail); an oversized notification is skipped. A
// stray line is logged by its length, hash and whether it is JSON, never
// its bytes (branch sdkbreak2: it may carry a call's data or a secret);
// nor are a malformed answer's bytes (the call's result data).
func TestStdoutGuard(t *testing.T) {
	big := strings.Repeat("r", 200)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`debug: token=stray-secret-1`,
		`{"jsonrpc":"2.0","id":2,"error":"boom-result-data"}`,
		`{"result":{"text":"` + big + `"},"jsonrpc":"2.0","id":3}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big + `"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
	}, "\n") + "\n"
	var logs logBuffer
	passed, err := io.ReadAll(newStdoutGuard(t.Context(), iotest.OneByteReader(strings.NewReader(in)), 128, logs.logger(), nil))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(passed)), "\n")
	if len(lines) != 4 {
		t.Fatalf("passed %d lines, want 4:\n%s", len(lines), passed)
	}
	if lines[0] != `{"jsonrpc":"2.0","id":1,"result":{}}` || lines[3] != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}` {
		t.Errorf("valid lines altered: %q, %q", lines[0], lines[3])
	}
	for i, want := range []struct {
		id   string
		code int64
		msg  string
	}{{"2", codeBrokenAnswer, "malformed response"}, {"3", codeResultTooLarge, "exceeds limits.max_result_bytes (128 bytes)"}} {
		var got struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(lines[i+1]), &got); err != nil || string(got.ID) != want.id || got.Error.Code != want.code || !strings.Contains(got.Error.Message, want.msg) {
			t.Errorf("line %d = %s, want an error response to id %s with code %d saying %q", i+1, lines[i+1], want.id, want.code, want.msg)
		}
	}
	// The stray line by its length, hash and JSON-ness, never its bytes
	// (it may be a broken message carrying a call's data or a secret).
	sum := sha256.Sum256([]byte("debug: token=stray-secret-1"))
	stray := fmt.Sprintf("bytes=27 sha256=%x json=false", sum[:6])
	for _, want := range []string{stray, "skipped a message larger than limits.max_result_bytes that answers no call", "a malformed answer to a call; the call fails"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "boom-result-data") || strings.Contains(logs.String(), "stray-secret") {
		t.Errorf("the log carries a malformed answer's bytes:\n%s", logs.String())
	}
}
