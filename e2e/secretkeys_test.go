package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keyToken is a GitHub-token-shaped secret that the agent puts in an
// object key (an environment given as "NAME=value" keys).
const keyToken = "ghp_0123456789abcdefghijABCDEFGHIJ01234567"

// TestSecretKeysNeverShown (fixes30): a secret in an object key is hidden
// on every surface that shows the display copy: `approvals list`, `show`
// and `show --json` (the CLI as a process), the REST API, the inbox's
// pages, a webhook's event, and `audit export` (a held call's request and an allowed call's
// record). The call itself still gets the real key. Before, the key was
// shown as sent (attack29, finding 1).
func TestSecretKeysNeverShown(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	rc := startHookReceiver(t, 0)
	cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), auditorYAML+upstreamServer(record)+auditPolicy+webhookSection(""))
	g := startGateway(t, cfg, map[string]string{"E2E_AUDITOR_TOKEN": auditorToken, "HOOK_URL": rc.URL, "HOOK_SECRET": hookSecret})
	cs := g.connect(t, nil, nil)
	args := json.RawMessage(`{"n":0,"env":{"GITHUB=` + keyToken + `":"","HOME":"/root"}}`)

	mustOK(t, await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: args})))
	held := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__progress", Arguments: args})
	id := waitPending(t, g.Admin, 1)[0].ID

	// noToken fails unless s lacks the token and (but for the inbox's
	// list, whose summary shows "env: {2 keys}") shows the key's marker.
	noToken := func(where, s string) {
		t.Helper()
		if strings.Contains(s, keyToken) || strings.Contains(s, "0123456789abcdefghij") {
			t.Errorf("%s shows the token:\n%s", where, s)
		}
		if where != "inbox /ui/" && !strings.Contains(s, "[redacted key 1]") {
			t.Errorf("%s does not show the key's marker:\n%s", where, s)
		}
	}
	noToken("approvals list", mustCLI(t, g.Admin, "list"))
	noToken("approvals show", mustCLI(t, g.Admin, "show", id))
	noToken("approvals show --json", mustCLI(t, g.Admin, "show", id, "--json"))
	for _, path := range []string{"/v1/approvals/" + id, "/v1/approvals"} {
		status, body, err := adminDo(t.Context(), http.MethodGet, g.Admin+path, approverToken, nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET %s: %d %v\n%s", path, status, err, body)
		}
		noToken("GET "+path, string(body))
	}
	rc.waitEvent(t, id, "requested", "")
	rc.mu.Lock()
	for _, a := range rc.attempts {
		noToken("the webhook's "+a.Body.Type+" event", a.Raw)
	}
	rc.mu.Unlock()
	inbox := signedInInbox(t, g.Admin, approverToken)
	for _, path := range []string{"/ui/", "/ui/approvals/" + id} {
		noToken("inbox "+path, inboxPage(t, inbox, g.Admin+path))
	}

	mustCLI(t, g.Admin, "approve", id)
	mustOK(t, await(t, held))
	waitState(t, g.Admin, id, "consumed")
	if lines := readRecord(t, record); len(lines) != 2 || !strings.Contains(lines[0], keyToken) || !strings.Contains(lines[1], keyToken) {
		t.Errorf("upstream record = %q, want both calls with the real key", lines)
	}

	lines, recs := auditExport(t, g.Admin)
	types := map[string]bool{}
	for i, r := range recs {
		types[r.Type+" "+r.Tool] = true
		if strings.Contains(string(lines[i].Record), keyToken) {
			t.Errorf("exported link %d shows the token: %s", r.Seq, lines[i].Record)
		}
	}
	for _, want := range []string{"allowed echo_raw", "requested progress"} {
		if !types[want] {
			t.Errorf("export lacks %q: %v", want, types)
		}
	}
	out := mustToolgate(t, g.Admin, auditorToken, "audit", "export", "--format", "jsonl")
	noToken("audit export", out)
}

// signedInInbox is an HTTP client signed in to the inbox at admin with
// token (the sign-in form, as a browser posts it).
func signedInInbox(t *testing.T, admin, token string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	form := inboxPage(t, c, admin+"/ui/signin")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(form)
	if m == nil {
		t.Fatalf("no csrf field in the sign-in form:\n%s", form)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, admin+"/ui/signin",
		strings.NewReader(url.Values{"csrf": {m[1]}, "token": {token}, "next": {"/ui/"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", admin)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/ui/" {
		t.Fatalf("sign-in: %d at %s\n%s", res.StatusCode, res.Request.URL, body)
	}
	return c
}

// inboxPage GETs u with c and fails unless it answers 200.
func inboxPage(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", u, res.StatusCode, err, body)
	}
	return string(body)
}
