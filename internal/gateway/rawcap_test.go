package gateway

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSSETee(t *testing.T) {
	const result = `{"content":[],"structuredContent":{"n":12345678901234567890}}`
	answer := "data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":" + result + "}\n\n"
	// An over-large event's size counts its lines, not its blank line.
	tooLarge := func(stream string, max int) string {
		return "data: " + string(resultTooLargeResponse(json.RawMessage("5"), int64(len(stream)-1), max)) + "\n\n"
	}
	ended := string(brokenEventBytes(json.RawMessage("5"), brokenAnswerError("the event stream ended before the answer")))
	long := "data: {\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + strings.Repeat("y", 200) + "\"}]},\n" +
		"data: \"jsonrpc\":\"2.0\",\"id\":5}\n\n"
	tests := []struct {
		name   string
		stream string
		max    int
		want   string // captured result
		out    string // what the SDK reads; "" means the stream unchanged
	}{
		{
			name:   "one event",
			stream: "event: message\n" + answer,
			want:   result,
		},
		{
			name:   "crlf and progress first",
			stream: "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n: comment\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":" + result + "}\r\n\r\n",
			want:   result,
		},
		{
			name:   "data split over lines",
			stream: "data: {\"jsonrpc\":\"2.0\",\"id\":5,\n" + "data: \"result\":" + result + "}\n\n",
			want:   result,
		},
		{
			// The stream ends before the answer: the call fails
			// (review16).
			name:   "another id",
			stream: "data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":" + result + "}\n\n",
			out:    "data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":" + result + "}\n\n" + ended,
		},
		{
			name:   "the answer too large",
			stream: answer,
			max:    64,
			out:    tooLarge(answer, 64),
		},
		{
			name:   "the answer too large, result first, id last, over lines",
			stream: long,
			max:    120,
			out:    tooLarge(long, 120),
		},
		{
			name:   "the answer too large, CRLF lines",
			stream: strings.ReplaceAll(long, "\n", "\r\n"),
			max:    120,
			out:    "data: " + string(resultTooLargeResponse(json.RawMessage("5"), int64(len(strings.ReplaceAll(long, "\n", "\r\n"))-2), 120)) + "\n\n",
		},
		{
			name:   "a large event that answers nothing is dropped, then the answer",
			stream: "data: " + strings.Repeat("x", 150) + "\n\n" + answer,
			max:    120,
			want:   result,
			out:    answer,
		},
		{
			name:   "a large request from the server is dropped",
			stream: "data: {\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"sampling/createMessage\",\"params\":{\"x\":\"" + strings.Repeat("z", 150) + "\"}}\n\n",
			max:    120,
			out:    ended,
		},
		{
			// The SDK dispatches an unterminated last event at the end
			// of the stream: it is the answer (sdkbreak.go).
			name:   "unterminated",
			stream: "data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":" + result + "}\n",
			want:   result,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1 << 20
			}
			s := &slot{}
			// One byte per Read, so every boundary falls mid-line somewhere.
			r := &sseTee{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(tt.stream))), s: s, id: json.RawMessage("5"), max: max, log: slog.New(slog.DiscardHandler)}
			passed, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.out
			if want == "" && !strings.Contains(tt.name, "dropped") {
				want = tt.stream
			}
			if diff := cmp.Diff(want, string(passed)); diff != "" {
				t.Errorf("the SDK read (-want +got):\n%s", diff)
			}
			if got := string(s.result()); got != tt.want {
				t.Errorf("captured %q, want %q", got, tt.want)
			}
		})
	}
}

func TestJSONLimit(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":"a","result":{"structuredContent":1e400}}`
	for _, tt := range []struct {
		name string
		max  int
		size int64 // Content-Length
		want string
		out  string
	}{
		{name: "within", max: 1 << 20, size: -1, want: `{"structuredContent":1e400}`, out: body},
		{name: "too large", max: 20, size: -1, out: string(resultTooLargeResponse(json.RawMessage(`"a"`), -1, 20))},
		{name: "too large by Content-Length", max: 20, size: int64(len(body)), out: string(resultTooLargeResponse(json.RawMessage(`"a"`), int64(len(body)), 20))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &slot{}
			r := &jsonLimit{body: io.NopCloser(iotest.HalfReader(strings.NewReader(body))), s: s, id: json.RawMessage(`"a"`), max: tt.max, size: tt.size, log: slog.New(slog.DiscardHandler)}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.out {
				t.Errorf("the SDK read %s, want %s", got, tt.out)
			}
			if got := string(s.result()); got != tt.want {
				t.Errorf("captured %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecodeResult(t *testing.T) {
	raw := `{"content":[{"type":"text","text":"hi"}],"isError":true,` +
		`"structuredContent":{"a":1e400,"b":[9007199254740993]},` +
		`"_meta":{"big":12345678901234567890,"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`
	res, err := decodeResult(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_meta":{"big":12345678901234567890},"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1e400,"b":[9007199254740993]},"isError":true}`
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("re-encoded result (-want +got):\n%s", diff)
	}

	for _, bad := range []string{`[]`, `{"content":7}`, `{"_meta":[]}`} {
		if _, err := decodeResult(json.RawMessage(bad)); err == nil {
			t.Errorf("decodeResult(%s): no error", bad)
		}
	}
	if res, err := decodeResult(json.RawMessage(`{"content":[],"structuredContent":null}`)); err != nil || res.StructuredContent != nil {
		t.Errorf("null structuredContent: %v, %v", res, err)
	}
}

// TestWithRawNumbers: a result the SDK could decode keeps the numbers of
// structuredContent and _meta as received, as decodeResult does.
func TestWithRawNumbers(t *testing.T) {
	tests := []struct{ raw, want string }{
		{
			raw: `{"content":[{"type":"text","text":"hi"}],"isError":true,` +
				`"structuredContent":{"b":[9007199254740993],"c":0.10000000000000000001},` +
				`"_meta":{"big":12345678901234567890,"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`,
			want: `{"_meta":{"big":12345678901234567890},"content":[{"type":"text","text":"hi"}],"structuredContent":{"b":[9007199254740993],"c":0.10000000000000000001},"isError":true}`,
		},
		{raw: `{"content":[],"structuredContent":null,"_meta":null}`, want: `{"content":[]}`},
		{raw: `{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{}}}`, want: `{"content":[]}`},
	}
	for _, tt := range tests {
		var res mcp.CallToolResult
		if err := json.Unmarshal([]byte(tt.raw), &res); err != nil { // as the SDK decodes it
			t.Fatal(err)
		}
		got, err := withRawNumbers(&res, json.RawMessage(tt.raw))
		if err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, string(out)); diff != "" {
			t.Errorf("%s: re-encoded result (-want +got):\n%s", tt.raw, diff)
		}
		viaDecode, err := decodeResult(json.RawMessage(tt.raw))
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(viaDecode); string(again) != string(out) {
			t.Errorf("%s: decodeResult gives %s, withRawNumbers %s", tt.raw, again, out)
		}
	}
	res := mcp.CallToolResult{StructuredContent: map[string]any{"a": 1.0}, Meta: mcp.Meta{"k": "v"}}
	if _, err := withRawNumbers(&res, json.RawMessage(`{"structuredContent":{"a":1},"_meta":[]}`)); err == nil {
		t.Error("_meta that is not an object: no error")
	}
	if res.Meta["k"] != "v" || res.StructuredContent.(map[string]any)["a"] != 1.0 {
		t.Errorf("a failed withRawNumbers changed the result: %+v", res)
	}
}

func TestStderrLines(t *testing.T) {
	long := strings.Repeat("L", maxStderrLine+10)
	tests := []struct {
		name   string
		writes []string
		want   []stderrLine
	}{
		{name: "lines", writes: []string{"a\nb\n"}, want: []stderrLine{{text: "a"}, {text: "b"}}},
		{name: "split writes", writes: []string{"he", "llo\r\nwor", "ld\n"}, want: []stderrLine{{text: "hello"}, {text: "world"}}},
		{name: "partial line kept", writes: []string{"x\npartial"}, want: []stderrLine{{text: "x"}}},
		{name: "too long", writes: []string{long[:100], long[100:] + "\nnext\n"}, want: []stderrLine{{text: long[:maxStderrLine], truncated: true}, {text: "next"}}},
		{name: "empty line", writes: []string{"\n"}, want: []stderrLine{{text: ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStderrLog("up", nil, slog.New(slog.DiscardHandler))
			for _, w := range tt.writes {
				if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			var got []stderrLine
			for len(s.lines) > 0 {
				got = append(got, <-s.lines)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(stderrLine{})); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStderrNeverBlocks(t *testing.T) {
	s := newStderrLog("up", nil, slog.New(slog.DiscardHandler)) // nobody drains it
	for range stderrQueue + 10 {
		_, _ = s.Write([]byte("line\n"))
	}
	if got := s.dropped.Load(); got != 10 {
		t.Errorf("dropped %d lines, want 10", got)
	}
}

func TestIsObjectSchema(t *testing.T) {
	tests := []struct {
		schema any
		want   bool
	}{
		{map[string]any{"type": "object"}, true},
		{json.RawMessage(`{"type":"object","properties":{}}`), true},
		{map[string]any{"type": "string"}, false},
		{map[string]any{}, false},
		{nil, false},
		{json.RawMessage(`true`), false},
	}
	for _, tt := range tests {
		if got := isObjectSchema(tt.schema); got != tt.want {
			t.Errorf("isObjectSchema(%v) = %v, want %v", tt.schema, got, tt.want)
		}
	}
}

func TestWeirdInputSchemaSubstituted(t *testing.T) {
	// The SDK panics on a non-object input schema; the gateway exposes the
	// tool with {"type":"object"} and warns.
	var logs logBuffer
	g := newGateway(t, nil, allowAll(), &Options{Logger: logs.logger()})
	if err := g.applyTools("up", upstreamTools{defs: []*mcp.Tool{{Name: "odd", InputSchema: map[string]any{"type": "string"}}}}, true); err != nil {
		t.Fatal(err)
	}
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != "up__odd" {
		t.Fatalf("tools %v", res.Tools)
	}
	if diff := cmp.Diff(map[string]any{"type": "object"}, res.Tools[0].InputSchema); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no warning:\n%s", logs.String())
	}
}
