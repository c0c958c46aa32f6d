package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"toolgate/internal/approval"
)

// c15Args are the arguments of case C15 as the agent sends them (JSON
// escapes for the hidden characters), plus a secret-looking key.
const c15Args = `{"command":"rm -rf ~ \u001b[2K\u001b[1Gls -la","path":"/srv/invoice\u202Efdp.exe","to":"acct\u200b-1","password":"hunter2"}`

// hiddenRunes are the characters of c15Args that must never reach a
// reviewer's terminal raw, with the visible escape each must show as.
var hiddenRunes = []struct {
	raw     string
	escaped string
	code    string // as named in display warnings
}{
	{"\u001b", `\u001B`, "U+001B"},
	{"\u202e", `\u202E`, "U+202E"},
	{"\u200b", `\u200B`, "U+200B"},
}

// TestDisplayIntegrity is case C15: `toolgate approvals show` prints a
// WARNING block naming the hidden characters and shows them as visible
// escapes, never raw; --json and the API carry display_warnings; a
// secret-looking key is redacted in show, --json and the API; the hash still
// covers the real value, so approving with the pinned hash runs the call
// with the real secret.
func TestDisplayIntegrity(t *testing.T) {
	g, record := startUpstreamGateway(t, heldEchoPolicy)
	cs := g.connect(t, nil, nil)
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", c15Args))
	p := waitPending(t, g.Admin, 1)[0]

	noRaw := func(where, s string) {
		t.Helper()
		for _, h := range hiddenRunes {
			if strings.Contains(s, h.raw) {
				t.Errorf("%s contains a raw %s:\n%q", where, h.code, s)
			}
		}
		if strings.Contains(s, "hunter2") {
			t.Errorf("%s shows the secret value:\n%s", where, s)
		}
	}

	show := mustCLI(t, g.Admin, "show", p.ID)
	noRaw("approvals show", show)
	head, _, _ := strings.Cut(show, "Approval:")
	if !strings.HasPrefix(show, "WARNING") {
		t.Errorf("approvals show does not start with a WARNING block:\n%s", show)
	}
	for _, h := range hiddenRunes {
		if !strings.Contains(head, h.code) {
			t.Errorf("the WARNING block does not name %s:\n%s", h.code, head)
		}
		if !strings.Contains(show, h.escaped) {
			t.Errorf("approvals show does not show %s as the visible escape %s:\n%s", h.code, h.escaped, show)
		}
	}
	if !strings.Contains(show, `[redacted: key \"password\"]`) && !strings.Contains(show, `[redacted: key "password"]`) {
		t.Errorf("approvals show does not show the password as redacted:\n%s", show)
	}

	js := mustCLI(t, g.Admin, "show", p.ID, "--json")
	noRaw("approvals show --json", js)
	var shown approvalDoc
	if err := json.Unmarshal([]byte(js), &shown); err != nil {
		t.Fatalf("approvals show --json: %v\n%s", err, js)
	}
	checkWarnings(t, "approvals show --json", shown.DisplayWarnings)

	status, body, err := adminDo(t.Context(), http.MethodGet, g.Admin+"/v1/approvals/"+p.ID, approverToken, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET approval: %d %v\n%s", status, err, body)
	}
	noRaw("GET /v1/approvals/{id}", string(body))
	var api approvalDoc
	if err := json.Unmarshal(body, &api); err != nil {
		t.Fatal(err)
	}
	checkWarnings(t, "the API", api.DisplayWarnings)
	var display struct{ Command, Path, To, Password string }
	if err := json.Unmarshal(api.Arguments, &display); err != nil {
		t.Fatalf("display arguments %s: %v", api.Arguments, err)
	}
	if display.Path != "/srv/invoice\u202efdp.exe" || display.To != "acct\u200b-1" || !strings.HasPrefix(display.Password, "[redacted") {
		t.Errorf("the display copy decodes to %+v: want the exact text with hidden characters, and the password redacted", display)
	}

	// The hash covers the real arguments, not the display copy.
	realHash, err := approval.Hash([]byte(c15Args))
	if err != nil {
		t.Fatal(err)
	}
	displayHash, err := approval.Hash(api.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	if api.ArgumentsHash != realHash || realHash == displayHash {
		t.Errorf("arguments_hash = %s; want the hash of the real arguments %s (the display copy hashes to %s)", api.ArgumentsHash, realHash, displayHash)
	}
	mustCLI(t, g.Admin, "approve", p.ID, "--hash", api.ArgumentsHash)
	got := mustOK(t, await(t, ch))
	var received struct{ Command, Path, To, Password string }
	if err := json.Unmarshal([]byte(got), &received); err != nil {
		t.Fatalf("the upstream received %q: %v", got, err)
	}
	want := struct{ Command, Path, To, Password string }{"rm -rf ~ \x1b[2K\x1b[1Gls -la", "/srv/invoice\u202efdp.exe", "acct\u200b-1", "hunter2"}
	if received != want {
		t.Errorf("the upstream received %+v, want %+v", received, want)
	}
	if lines := readRecord(t, record); len(lines) != 1 || !strings.Contains(lines[0], `"password":"hunter2"`) {
		t.Errorf("upstream record = %q, want one execution with the real password", lines)
	}
}

// checkWarnings fails unless warnings name every hidden character.
func checkWarnings(t *testing.T, where string, warnings []string) {
	t.Helper()
	all := strings.Join(warnings, "\n")
	for _, h := range hiddenRunes {
		if !strings.Contains(all, h.code) {
			t.Errorf("%s: display_warnings %q do not name %s", where, warnings, h.code)
		}
	}
}
