package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startUpstreamGateway starts a gateway in front of testupstream ("t") with
// the given approvals and policy sections, and returns it with the path of
// the upstream's record file.
func startUpstreamGateway(t *testing.T, sections string) (*gw, string) {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+sections), nil)
	return g, record
}

// TestCancellationReachesUpstream cancels an allowed call mid-flight and
// checks that the upstream saw the cancellation.
func TestCancellationReachesUpstream(t *testing.T) {
	g, record := startUpstreamGateway(t, `
policy:
  default: deny
  rules:
    - name: slow is fine
      server: t
      tools: [slow]
      effect: allow
`)
	cs := g.connect(t, nil, nil)

	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "t__slow", Arguments: json.RawMessage(`{"id":"c1"}`)})
	waitRecord(t, record, `slow started {"id":"c1"}`)
	cancel()
	lines := waitRecord(t, record, `slow cancelled {"id":"c1"}`)
	elapsed(t, "allowed slow call, cancelled by the client, seen upstream", start)
	if r := await(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled call returned (%v, %v), want context.Canceled", r.res, r.err)
	}
	want := []string{`slow started {"id":"c1"}`, `slow cancelled {"id":"c1"}`}
	if !slices.Equal(lines, want) {
		t.Errorf("record = %q, want %q", lines, want)
	}

	// The session is still usable: the same tool runs to its end.
	r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__slow", Arguments: json.RawMessage(`{"id":"c2","seconds":0.05}`)}))
	if got := mustOK(t, r); got != "slept" {
		t.Errorf("second slow call = %q, want \"slept\"", got)
	}
}

// TestDeniedByPolicy checks that a call matching a deny rule is refused with
// an isError naming the rule and never reaches the upstream.
func TestDeniedByPolicy(t *testing.T) {
	g, record := startUpstreamGateway(t, `
policy:
  default: allow
  rules:
    - name: no raw echo
      server: t
      tools: [echo_raw]
      effect: deny
`)
	cs := g.connect(t, nil, nil)

	msg := mustIsError(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"x":1}`)})))
	if !strings.Contains(msg, "no raw echo") {
		t.Errorf("denied call says %q, want it to name the rule %q", msg, "no raw echo")
	}
	// An allowed call afterwards proves the record is live: it shows that
	// call and nothing of the denied one.
	mustOK(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{"after":"deny"}`)})))
	if got, want := readRecord(t, record), []string{`big_result {"after":"deny"}`}; !slices.Equal(got, want) {
		t.Errorf("upstream record = %q, want %q (the denied call must never run)", got, want)
	}
	if got := approvals(t, g.Admin, "all"); len(got) != 0 {
		t.Errorf("a policy deny created approvals: %+v", got)
	}
}

// jsonTokens returns the token stream of a JSON text: delimiters, keys and
// strings unescaped, numbers as their exact literal. Two texts with equal
// streams hold the same value with the same key order and number literals,
// whatever their whitespace and string escaping.
func jsonTokens(t *testing.T, b []byte) []any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var toks []any
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return toks
		}
		if err != nil {
			t.Fatalf("tokens of %s: %v", b, err)
		}
		toks = append(toks, tok)
	}
}

// sseStructuredContent finds, in the raw bytes of Streamable HTTP responses (JSON or
// SSE "data:" lines), the result of the JSON-RPC response whose result has
// a structuredContent member, and returns the raw structuredContent.
func sseStructuredContent(t *testing.T, raw string) json.RawMessage {
	t.Helper()
	var found json.RawMessage
	sc := bufio.NewScanner(strings.NewReader(raw))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "data:"))
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var msg struct {
			Result *struct {
				StructuredContent json.RawMessage `json:"structuredContent"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.Result != nil && msg.Result.StructuredContent != nil {
			if found != nil {
				t.Fatalf("two results with structuredContent in the captured responses:\n%s", raw)
			}
			found = msg.Result.StructuredContent
		}
	}
	if found == nil {
		t.Fatalf("no result with structuredContent in the captured responses:\n%s", raw)
	}
	return found
}

// TestValueFidelity checks that arguments reach the upstream as the same
// JSON value the agent sent (key order, number literals past 2^53, string
// escapes), and that integers past 2^53 in a result reach the client's wire
// with their digits intact.
func TestValueFidelity(t *testing.T) {
	g, record := startUpstreamGateway(t, `
policy:
  default: allow
`)
	capture := new(syncBuffer)
	cs := g.connect(t, nil, capture)

	t.Run("arguments", func(t *testing.T) {
		const sent = `{"z":9007199254740993,"s":"\u00e9<&>\/","b":{"y":1,"x":2},"n":18446744073709551616}`
		r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(sent)}))
		received := mustOK(t, r) // echo_raw returns the bytes it received
		var want, got bytes.Buffer
		if err := json.Compact(&want, []byte(sent)); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&got, []byte(received)); err != nil {
			t.Fatalf("upstream received invalid JSON %q: %v", received, err)
		}
		if got.String() != want.String() {
			// DESIGN allows whitespace and escaping to differ; the value,
			// key order and number literals must not.
			t.Logf("upstream bytes differ from the sent bytes (compacted): got %s, sent %s; comparing token streams", &got, &want)
		}
		if gotT, wantT := jsonTokens(t, got.Bytes()), jsonTokens(t, want.Bytes()); !slices.Equal(gotT, wantT) {
			t.Errorf("upstream received %s, want the same value as sent %s\ntokens got:  %q\ntokens want: %q", &got, &want, gotT, wantT)
		}
		if lines := readRecord(t, record); !slices.Contains(lines, "echo_raw "+want.String()) && !slices.Contains(lines, "echo_raw "+got.String()) {
			t.Errorf("upstream record = %q, want one echo_raw execution", lines)
		}
	})

	t.Run("big integers in a result", func(t *testing.T) {
		const want = `{"max":9223372036854775807,"u64":18446744073709551615}`
		before := len(capture.String())
		r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__big_result", Arguments: json.RawMessage(`{}`)}))
		mustOK(t, r)
		raw := sseStructuredContent(t, capture.String()[before:])
		if gotT, wantT := jsonTokens(t, raw), jsonTokens(t, []byte(want)); !slices.Equal(gotT, wantT) {
			t.Errorf("structuredContent on the client's wire = %s, want %s", raw, want)
		}
		for _, digits := range []string{"9223372036854775807", "18446744073709551615"} {
			if !strings.Contains(string(raw), digits) {
				t.Errorf("structuredContent on the client's wire = %s: %s lost its digits", raw, digits)
			}
		}
	})
}
