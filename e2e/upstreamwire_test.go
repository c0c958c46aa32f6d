package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPerAgentUpstreamWire pins what a per-agent stdio upstream (the
// default for a command server) receives from toolgate: per agent session
// one process and one handshake (initialize, notifications/initialized,
// logging/setLevel), then per call exactly one tools/call line carrying
// the tool, its arguments and toolgate's own progress token; nothing else
// per call (health pings aside). docs/performance.md, branch upcost35: the
// upstream's CPU per call is the process's wake-up, so any extra message
// per call would cost as much again.
func TestPerAgentUpstreamWire(t *testing.T) {
	dir := t.TempDir()
	wire := filepath.Join(dir, "wire")
	if err := os.Mkdir(wire, 0o700); err != nil {
		t.Fatal(err)
	}
	// The wrapper copies the upstream's stdin, one file per process.
	wrap := filepath.Join(dir, "wrap.sh")
	script := "#!/bin/sh\ntee " + q(wire) + "/in.$$ | exec " + q(bins.upstream) + ` "$@"` + "\n"
	if err := os.WriteFile(wrap, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "record.log")
	servers := strings.Replace(upstreamServer(record), q(bins.upstream), q(wrap), 1)
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "gw.db"), servers+"policy:\n  default: allow\n"), nil)

	const agents, calls = 2, 3
	for a := range agents {
		cs := g.connect(t, nil, nil)
		for i := range calls {
			p := toolCall("t__echo_raw", fmt.Sprintf(`{"a":%d,"i":%d}`, a, i))
			p.SetProgressToken(fmt.Sprintf("agent-%d-%d", a, i))
			res, err := cs.CallTool(t.Context(), p)
			if err != nil || res.IsError {
				t.Fatalf("call %d of agent %d: %v %+v", i, a, err, res)
			}
		}
	}

	// Each call returned, so its line went through tee; tee may write its
	// file just after the pipe, so wait for the lines.
	var perAgent map[string][]map[string]json.RawMessage
	for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(20 * time.Millisecond) {
		perAgent = readWire(t, wire)
		n := 0
		for _, msgs := range perAgent {
			n += countMethod(msgs, "tools/call")
		}
		if n == agents*calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstreams got %d tools/call lines, want %d", n, agents*calls)
		}
	}
	callers := 0
	for file, msgs := range perAgent {
		if countMethod(msgs, "tools/call") == 0 {
			continue // the shared session (catalogs)
		}
		callers++
		var methods []string
		for _, m := range msgs {
			var method string
			_ = json.Unmarshal(m["method"], &method)
			if method == "ping" {
				continue // the health check, every 10 s
			}
			if method == "" {
				method = "(answer)"
			}
			methods = append(methods, method)
		}
		want := []string{"initialize", "notifications/initialized", "logging/setLevel", "tools/call", "tools/call", "tools/call"}
		if !slices.Equal(methods, want) {
			t.Errorf("%s: methods %q, want %q", file, methods, want)
		}
		for _, m := range msgs {
			if !bytes.Equal(m["method"], []byte(`"tools/call"`)) {
				continue
			}
			var params struct {
				Name      string                     `json:"name"`
				Arguments json.RawMessage            `json:"arguments"`
				Meta      map[string]json.RawMessage `json:"_meta"`
			}
			if err := json.Unmarshal(m["params"], &params); err != nil {
				t.Fatal(err)
			}
			var keys map[string]json.RawMessage
			_ = json.Unmarshal(m["params"], &keys)
			if len(keys) != 3 || params.Name != "echo_raw" || len(params.Meta) != 1 {
				t.Errorf("%s: tools/call params %s, want name, arguments and _meta with only a progress token", file, m["params"])
			}
			tok := string(params.Meta["progressToken"])
			if !strings.HasPrefix(tok, `"toolgate-`) {
				t.Errorf("%s: progress token %s, want toolgate's own (the agent's is never sent upstream)", file, tok)
			}
		}
	}
	if callers != agents {
		t.Errorf("%d upstream processes got calls, want %d (one per agent session)", callers, agents)
	}
}

// readWire parses each in.<pid> file of dir into its JSON-RPC messages.
func readWire(t *testing.T, dir string) map[string][]map[string]json.RawMessage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "in.*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]json.RawMessage{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(b) {
			if !bytes.HasSuffix(line, []byte("\n")) {
				break // still being written
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("%s: %v: %q", f, err, line)
			}
			out[filepath.Base(f)] = append(out[filepath.Base(f)], m)
		}
	}
	return out
}

// countMethod counts the requests and notifications named method in msgs.
func countMethod(msgs []map[string]json.RawMessage, method string) int {
	n := 0
	want := []byte(`"` + method + `"`)
	for _, m := range msgs {
		if bytes.Equal(m["method"], want) {
			n++
		}
	}
	return n
}
