package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// eventHeadSeeds are JSON-RPC messages (and near misses) as they come on
// an upstream's event stream.
var eventHeadSeeds = []string{
	`{"jsonrpc":"2.0","id":"tg-h7","result":{"content":[{"type":"text","text":"Echo: x"}]}}`,
	`{"jsonrpc":"2.0","id":5,"result":{}}`,
	` {"id" : "tg-h7" , "result":{"method":"x"}} `,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
	`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}`,
	`{"jsonrpc":"2.0","ID":"tg-h7","result":{}}`,
	`{"jsonrpc":"2.0","Id":"tg-h7","id":"tg-h8","result":{}}`,
	`{"jsonrpc":"2.0","id":"tg-h7","id":"tg-h8","result":{}}`,
	`{"jsonrpc":"2.0","Method":"notifications/message","params":{}}`,
	`{"jsonrpc":"2.0","METHOD":"x","id":1}`,
	`{"jsonrpc":"2.0","\u0069d":"tg-h7","result":{}}`,
	`{"jsonrpc":"2.0","\u006dethod":"x"}`,
	`{"jsonrpc":"2.0","method":"x","method":"y"}`,
	`{"jsonrpc":"2.0","method":5,"id":1}`,
	`{"jsonrpc":"2.0","method":null,"id":1}`,
	`{"jsonrpc":"2.0","id":"tg-h7","result":{}} x`,
	`{"jsonrpc":"2.0","id":"tg-h7","result":{}`,
	`{"jsonrpc":"2.0","id":"tg-h7","result":{},}`,
	`[{"jsonrpc":"2.0","id":"tg-h7","result":{}}]`,
	`"tg-h7"`,
	``,
	`{}`,
	`{"id":"tg-h\u0037","result":{}}`,
	`{"id":"tg-h7","result":{"text":"\ud800"}}`,
	"{\"id\":\"tg-h7\",\"result\":{\"text\":\"\xff\"}}",
	`{"id":01,"result":{}}`,
	`{"id":1e400,"result":{}}`,
	`{"ıd":"tg-h7","result":{}}`,
	"{\"id\":\"tg-h7\",\"result\":{\"text\":\"a\tb\"}}",
}

// checkEventHead fails t when scanEventHead, having answered, differs
// from the decode of msg into sseMessage that it stands for.
func checkEventHead(t *testing.T, msg []byte) {
	t.Helper()
	id, method, ok := scanEventHead(msg)
	if !ok || method {
		return // the decode decides (only a message without a method is taken)
	}
	var m sseMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("%q: the scanner answered (id %q, no method), the decode failed: %v", msg, id, err)
	}
	if m.Method != "" {
		t.Fatalf("%q: scanner saw no method, the decode %q", msg, m.Method)
	}
	if !bytes.Equal(id, bytes.TrimSpace(m.ID)) {
		t.Fatalf("%q: scanner id %q, decode %q", msg, id, m.ID)
	}
}

// TestScanEventHeadIsTheDecode: wherever the scanner answers, the decode
// that readRawStream made for every event answers the same; it leaves
// folded, escaped and repeated keys and invalid JSON to the decode.
func TestScanEventHeadIsTheDecode(t *testing.T) {
	answered := 0
	for _, s := range eventHeadSeeds {
		checkEventHead(t, []byte(s))
		if _, _, ok := scanEventHead([]byte(s)); ok {
			answered++
		}
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","ID":"tg-h7","result":{}}`,
		`{"jsonrpc":"2.0","\u0049d":"tg-h7","result":{}}`,
		`{"jsonrpc":"2.0","id":"tg-h7","id":"tg-h8","result":{}}`,
		`{"jsonrpc":"2.0","Method":"notifications/message","params":{}}`,
		`{"jsonrpc":"2.0","id":"tg-h7","result":{}`,
	} {
		if _, _, ok := scanEventHead([]byte(s)); ok {
			t.Errorf("%s: the scanner answered; the decode must decide", s)
		}
	}
	if id, method, ok := scanEventHead([]byte(eventHeadSeeds[0])); !ok || method || string(id) != `"tg-h7"` {
		t.Errorf("the echo answer: id %s, method %v, ok %v; want \"tg-h7\", false, true", id, method, ok)
	}
	if answered < 10 {
		t.Errorf("the scanner answered %d seeds; the common shapes should not need the decode", answered)
	}
}

func FuzzScanEventHead(f *testing.F) {
	for _, s := range eventHeadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		checkEventHead(t, msg)
	})
}

// repeatReader returns b on every Read (a stream of the same event).
type repeatReader struct{ b []byte }

func (r repeatReader) Read(p []byte) (int, error) { return copy(p, r.b), nil }

// TestSSETeeResponseWithoutSlotDecodesNothing: on a stream whose POST has
// no slot (a raw call's, or the SDK's calls other than tools/call), a
// response event is passed on as it came without a decode; it used to be
// decoded once in full for nothing.
func TestSSETeeResponseWithoutSlotDecodesNothing(t *testing.T) {
	ev := "event: message\nid: 1\ndata: " + eventHeadSeeds[0] + "\n\n"
	tee := &sseTee{ReadCloser: io.NopCloser(repeatReader{[]byte(ev)}), max: 1 << 20, log: slog.New(slog.DiscardHandler)}
	p := make([]byte, len(ev))
	read := func() {
		n, err := io.ReadFull(tee, p)
		if err != nil || string(p[:n]) != ev {
			t.Fatalf("read %q, %v; want the event as it came", p[:n], err)
		}
	}
	read() // the tee's buffers grow once
	if n := testing.AllocsPerRun(100, read); n != 0 {
		t.Errorf("%v allocations per response event, want 0", n)
	}
}

// recordRT records the request it was given.
type recordRT struct{ got *http.Request }

func (r *recordRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req
	return &http.Response{StatusCode: http.StatusAccepted, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// TestCaptureRoundTripperCopiesOnlyToChange: without configured headers
// and a slot (a raw call), the request goes on as it came, not as a copy
// (a copy of the request and its header per call before); with
// configured headers they go on a copy and the caller's request is left
// unchanged.
func TestCaptureRoundTripperCopiesOnlyToChange(t *testing.T) {
	newReq := func() *http.Request {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	base := &recordRT{}
	req := newReq()
	resp, err := (&captureRoundTripper{base: base}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if base.got != req {
		t.Error("no headers to add and no slot: the request was copied")
	}
	req = newReq()
	resp, err = (&captureRoundTripper{base: base, headers: map[string]string{"X-Api-Key": "k"}}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if base.got == req || base.got.Header.Get("X-Api-Key") != "k" {
		t.Errorf("configured header: sent on a copy %v, header %q; want a copy with k", base.got != req, base.got.Header.Get("X-Api-Key"))
	}
	if req.Header.Get("X-Api-Key") != "" {
		t.Error("the caller's request got the configured header")
	}
}

// TestReadRawStreamReusesItsBuffers: reading a raw call's answer from its
// event stream allocates only the result's copy (and the reader over the
// body): the 4 KiB read buffer and the event buffer are reused across
// calls. Before, each call allocated both anew.
func TestReadRawStreamReusesItsBuffers(t *testing.T) {
	const result = `{"content":[{"type":"text","text":"Echo: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}]}`
	stream := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"tg-h7\",\"result\":" + result + "}\n\n"
	u := &upstream{g: &Gateway{opts: Options{MaxResultBytes: 1 << 20}}, log: slog.New(slog.DiscardHandler)}
	body := strings.NewReader(stream)
	read := func() {
		body.Reset(stream)
		raw, err := u.readRawStream(t.Context(), nil, body, "tg-h7")
		if err != nil || string(raw) != result {
			t.Fatalf("read %s, %v; want the result", raw, err)
		}
	}
	read()
	if raceEnabled {
		t.Skip("-race: sync.Pool drops buffers at random")
	}
	if n := testing.AllocsPerRun(100, read); n > 1 {
		t.Errorf("%v allocations per answer, want ≤ 1 (the result's copy)", n)
	}
}
