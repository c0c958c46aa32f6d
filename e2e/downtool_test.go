package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDownUpstreamToolIsUnavailable (unavail36): with serve as a process,
// a go-sdk agent calling a tool of a stdio server whose command does not
// exist, or of an HTTP server whose port is closed, gets an isError result
// naming the server as unavailable (not "unknown tool"), recorded in the
// audit trail as a refusal; a tool of a down server the policy denies
// outright stays "unknown tool", and so does an unknown name on an up
// server.
func TestDownUpstreamToolIsUnavailable(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "toolgate.db"), auditorYAML+`
servers:
  t:
    command: `+q(bins.upstream)+`
    args: ["-record", `+q(filepath.Join(dir, "record.log"))+`]
  fs:
    command: /nonexistent/npx-typo
    required: false
  web:
    url: http://127.0.0.1:1/mcp
    required: false
  secret:
    command: /nonexistent/secret-server
    required: false
policy:
  default: allow
  rules:
    - { name: no secret, server: secret, effect: deny }
`), map[string]string{"E2E_AUDITOR_TOKEN": auditorToken})
	rep, _ := waitReadyzStatus(t, g.Admin, http.StatusOK)
	if s := rep.Upstreams["fs"]; s.State != "reconnecting" {
		t.Fatalf("fs: %+v, want reconnecting", s)
	}
	cs := g.connect(t, nil, nil)
	for server, name := range map[string]string{"fs": "fs__read_text_file", "web": "web__fetch"} {
		msg := mustIsError(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(`{"path":"/etc/passwd"}`)})))
		if !strings.Contains(msg, `upstream "`+server+`" is unavailable: reconnecting since`) || !strings.Contains(msg, "nothing was run") {
			t.Errorf("%s: %q, want it to name %s as unavailable", name, msg, server)
		}
	}
	for _, name := range []string{"secret__read", "t__no_such_tool"} {
		r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: name}))
		if r.err == nil || !strings.Contains(r.err.Error(), "unknown tool: "+name) {
			t.Errorf("%s: %+v %v, want an unknown tool error", name, r.res, r.err)
		}
	}
	// The audit trail is written behind the calls: wait for both refusals.
	deadline := time.Now().Add(waitFor(t))
	for {
		_, recs := auditExport(t, g.Admin)
		var refused []string
		for _, r := range recs {
			if r.Type == "refused" {
				refused = append(refused, r.Tool)
			}
			if r.Tool == "read" || r.Tool == "no_such_tool" {
				t.Fatalf("a hidden or unknown tool was recorded: %+v", r)
			}
		}
		if len(refused) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit refusals %q, want read_text_file and fetch", refused)
		}
		time.Sleep(10 * pollEvery)
	}
}
