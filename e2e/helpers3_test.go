package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// More principals, for the tests of who may review what. agent-2 acts on
// behalf of alice, who is also an approver; carol, dave and alice are in
// group ops, bob is in no group.
const (
	agent2ID    = "agent-2"
	agent2Token = "e2e-agent2-token-51be"
	carolID     = "carol"
	carolToken  = "e2e-carol-token-0c3e"
	daveID      = "dave"
	daveToken   = "e2e-dave-token-77d2"
	aliceID     = "alice"
	aliceToken  = "e2e-alice-token-e81a"
)

// teamEnv gives the token_env entries of teamYAML that tokenEnv lacks;
// startGateway adds tokenEnv itself.
var teamEnv = map[string]string{
	"E2E_AGENT2_TOKEN": agent2Token,
	"E2E_CAROL_TOKEN":  carolToken,
	"E2E_DAVE_TOKEN":   daveToken,
	"E2E_ALICE_TOKEN":  aliceToken,
}

// teamYAML declares agent-1 (for nobody) and agent-2 (for alice), and the
// approvers bob, carol, dave and alice.
const teamYAML = `
agents:
  - id: ` + agentID + `
    token_env: E2E_AGENT_TOKEN
  - id: ` + agent2ID + `
    token_env: E2E_AGENT2_TOKEN
    on_behalf_of: ` + aliceID + `
approvers:
  - id: ` + approverID + `
    token_env: E2E_APPROVER_TOKEN
    roles: [approver]
  - id: ` + carolID + `
    token_env: E2E_CAROL_TOKEN
    roles: [approver]
    groups: [ops]
  - id: ` + daveID + `
    token_env: E2E_DAVE_TOKEN
    roles: [approver]
    groups: [ops]
  - id: ` + aliceID + `
    token_env: E2E_ALICE_TOKEN
    roles: [approver]
    groups: [ops]
`

// teamConfig is gatewayConfig with teamYAML as the principals.
func teamConfig(db, body string) string {
	return `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: sqlite
  path: ` + q(db) + `
` + teamYAML + body
}

// startTeamGateway starts a gateway in front of testupstream ("t") with the
// team principals and the given approvals and policy sections, and returns
// it with the path of the upstream's record file.
func startTeamGateway(t *testing.T, sections string) (*gw, string) {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	g := startGateway(t, teamConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(record)+sections), teamEnv)
	return g, record
}

// connectAs is gw.connect as the agent whose token is token.
func (g *gw) connectAs(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	return connectMCP(t, "e2e-agent", g.MCP, &bearer{token: token, base: g.tr}, nil)
}

// toolCall is a tools/call of tool with the raw JSON arguments args.
func toolCall(tool, args string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}
}

// approvalDoc is the admin API's approval JSON as far as these tests read
// it (apiApproval plus the fields about time, quorum and display).
type approvalDoc struct {
	apiApproval
	Mode              string    `json:"mode"`
	OnBehalfOf        string    `json:"on_behalf_of"`
	ExpiresAt         time.Time `json:"expires_at"`
	RequiredApprovals int       `json:"required_approvals"`
	DisplayWarnings   []string  `json:"display_warnings"`
	Reviews           []struct {
		By      string `json:"by"`
		Verdict string `json:"verdict"`
	} `json:"reviews"`
}

// adminDo sends method u with the bearer token and body (JSON-encoded when
// not nil) and returns the status and body. It never fails the test, so it
// may run on any goroutine.
func adminDo(ctx context.Context, method, u, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, waitFor(ctx))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Close = true // leave no idle connection to hold up the gateway's shutdown
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	return resp.StatusCode, b, nil
}

// fetchApprovalE reads approval id through the admin API at admin.
func fetchApprovalE(ctx context.Context, admin, id string) (approvalDoc, error) {
	status, body, err := adminDo(ctx, http.MethodGet, admin+"/v1/approvals/"+id, approverToken, nil)
	if err != nil {
		return approvalDoc{}, err
	}
	if status != http.StatusOK {
		return approvalDoc{}, fmt.Errorf("GET approval %s: %d %s", id, status, body)
	}
	var a approvalDoc
	if err := json.Unmarshal(body, &a); err != nil {
		return approvalDoc{}, fmt.Errorf("GET approval %s: %w\n%s", id, err, body)
	}
	return a, nil
}

// fetchApproval is fetchApprovalE that fails the test on an error.
func fetchApproval(t *testing.T, admin, id string) approvalDoc {
	t.Helper()
	a, err := fetchApprovalE(t.Context(), admin, id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// verdictResult is the answer of a review through the admin API.
type verdictResult struct {
	Status   int
	Code     string      // the error code of a non-200 answer
	Approval approvalDoc // the approval of a 200 answer
	Body     string
}

// postVerdictE posts verb ("approve" or "deny") on approval id with token and
// body (nil for none).
func postVerdictE(ctx context.Context, admin, token, id, verb string, body any) (verdictResult, error) {
	status, b, err := adminDo(ctx, http.MethodPost, admin+"/v1/approvals/"+id+"/"+verb, token, body)
	if err != nil {
		return verdictResult{}, err
	}
	r := verdictResult{Status: status, Body: string(b)}
	if status == http.StatusOK {
		err = json.Unmarshal(b, &r.Approval)
	} else {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		err = json.Unmarshal(b, &e)
		r.Code = e.Error.Code
	}
	if err != nil {
		return r, fmt.Errorf("%s %s: %d %w\n%s", verb, id, status, err, b)
	}
	return r, nil
}

// postVerdict is postVerdictE that fails the test on a transport or decoding error.
func postVerdict(t *testing.T, admin, token, id, verb string, body any) verdictResult {
	t.Helper()
	r, err := postVerdictE(t.Context(), admin, token, id, verb, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// jsonCompactString returns s without insignificant whitespace, or s itself if it
// is not valid JSON.
func jsonCompactString(s []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, s) != nil {
		return string(s)
	}
	return b.String()
}

// findApprovalByArgs returns the approval in state (or "all") whose display
// arguments equal args (compared compacted).
func findApprovalByArgs(ctx context.Context, admin, state, args string) (approvalDoc, bool, error) {
	u := admin + "/v1/approvals?" + url.Values{"state": {state}, "limit": {"1000"}}.Encode()
	status, body, err := adminDo(ctx, http.MethodGet, u, approverToken, nil)
	if err != nil {
		return approvalDoc{}, false, err
	}
	if status != http.StatusOK {
		return approvalDoc{}, false, fmt.Errorf("GET %s: %d %s", u, status, body)
	}
	var l struct {
		Approvals []approvalDoc `json:"approvals"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return approvalDoc{}, false, fmt.Errorf("GET %s: %w", u, err)
	}
	want := jsonCompactString([]byte(args))
	for _, a := range l.Approvals {
		if jsonCompactString(a.Arguments) == want {
			return a, true, nil
		}
	}
	return approvalDoc{}, false, nil
}

// awaitPendingArgs polls until a pending approval shows arguments args and
// returns it.
func awaitPendingArgs(t *testing.T, admin, args string) approvalDoc {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		a, ok, err := findApprovalByArgs(t.Context(), admin, "pending", args)
		switch {
		case err != nil:
			t.Fatal(err)
		case ok:
			return a
		case time.Now().After(deadline):
			t.Fatalf("no pending approval with arguments %s after %v", args, waitFor(t))
		}
		time.Sleep(pollEvery)
	}
}

// countLines returns how many lines of lines equal want.
func countLines(lines []string, want string) int {
	n := 0
	for _, l := range lines {
		if l == want {
			n++
		}
	}
	return n
}

// resultApprovalMeta returns the _meta["toolgate/approval"] entry of res, failing
// the test if it is missing.
func resultApprovalMeta(t *testing.T, res *mcp.CallToolResult) (id, state, mode, expiresAt string) {
	t.Helper()
	m, ok := res.Meta["toolgate/approval"].(map[string]any)
	if !ok {
		t.Fatalf("result has no _meta[\"toolgate/approval\"] object: meta %v, text %q", res.Meta, text(res))
	}
	str := func(k string) string {
		s, ok := m[k].(string)
		if !ok {
			t.Fatalf("_meta[\"toolgate/approval\"].%s = %#v, want a string (meta %v)", k, m[k], m)
		}
		return s
	}
	return str("id"), str("state"), str("mode"), str("expires_at")
}

// waitLog waits until one line of g's stderr contains every one of parts,
// and returns that line.
func (g *gw) waitLog(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		for _, line := range strings.Split(g.stderr.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line of toolgate contains all of %q after %v", parts, waitFor(t))
		}
		time.Sleep(pollEvery)
	}
}

// testClientBin builds e2e/testclient once, next to the other binaries.
var testClientBin = sync.OnceValues(func() (string, error) {
	out := filepath.Join(filepath.Dir(bins.toolgate), "testclient")
	return out, goBuild(out, "toolgate/e2e/testclient")
})

// clientProc is a running e2e/testclient process.
type clientProc struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{} // closed when it has exited
	err    error         // its exit error; read after done
}

// startClient runs testclient as the agent with token against g, calling
// tool with args. The process is killed on cleanup if it still runs.
func startClient(t *testing.T, g *gw, token, tool, args string) *clientProc {
	t.Helper()
	bin, err := testClientBin()
	if err != nil {
		t.Fatalf("build testclient: %v", err)
	}
	cmd := exec.Command(bin, "-mcp", g.MCP, "-tool", tool, "-args", args)
	cmd.Env = append(childEnv(), "TESTCLIENT_TOKEN="+token)
	p := &clientProc{cmd: cmd, stdout: new(syncBuffer), stderr: new(syncBuffer), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start testclient: %v", err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		checkChildLog(t, "testclient", p.stderr)
	})
	return p
}

// wait waits for the client to exit 0 and returns what it printed.
func (p *clientProc) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(waitFor(t)):
		t.Fatalf("testclient did not exit within %v", waitFor(t))
	}
	if p.err != nil {
		t.Fatalf("testclient: %v\nstdout: %s\nstderr: %s", p.err, p.stdout, p.stderr)
	}
	return strings.TrimSuffix(p.stdout.String(), "\n")
}

// scrapeMetrics reads the admin listener's /metrics (no token) and returns
// every sample by its series as written, e.g.
// `toolgate_approval_decisions_total{decision="approved"}`.
func scrapeMetrics(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	status, body, err := adminDo(t.Context(), http.MethodGet, admin+"/metrics", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", status, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// "name{labels} value" or "name value"; label values here hold no
		// spaces, so the value follows the last space.
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}
