package e2e

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// policy44Policy allows echo_raw for ssh to prod, python3, awk and echo,
// denies it when the command runs rm, and denies everything else.
const policy44Policy = `
policy:
  default: deny
  rules:
    - name: reads
      server: t
      tools: [echo_raw]
      command: {argument: command, match: ["ssh prod *", "python3 *", "awk *", "echo *"]}
      effect: allow
    - name: no rm
      server: t
      tools: [echo_raw]
      command: {argument: command, match: ["rm *"]}
      effect: deny
`

// TestShellStringsRemoteAndInlineCode (policy44) calls a tool through the
// binary with command strings that run rm where the matcher saw no rm:
// ssh's remote command, an interpreter's inline code, text ${x@E} spells
// evaluated as arithmetic. On 8308deeb the allow rule let the ssh,
// python3 and awk ones run (the upstream recorded them), and the deny rule
// missed the last (the default denied it); the rule "no rm" must deny
// each, and none reach the upstream. ssh prod uptime and a plain awk
// still run.
func TestShellStringsRemoteAndInlineCode(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "tg.db"), upstreamServer(record)+policy44Policy), nil)
	cs := g.connect(t, nil, nil)
	args := func(command string) string {
		b, err := json.Marshal(map[string]string{"command": command})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []string{
		"ssh prod 'uptime; rm -rf ~'",
		`python3 -c 'import shutil, os; shutil.rmtree(os.path.expanduser("~"))'`,
		`awk 'BEGIN{system("rm -rf ~")}'`,
		`x='b\x5b\x24(rm -rf ~)]'; echo $(( ${x@E} ))`,
	} {
		msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", args(c)))))
		if !strings.Contains(msg, `denied by policy rule "no rm"`) {
			t.Errorf("command %q: %q, want a denial by the rule \"no rm\"", c, msg)
		}
	}
	var want []string
	for _, c := range []string{"ssh prod uptime", `awk '{print $1}' f`} {
		mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", args(c)))))
		want = append(want, "echo_raw "+args(c))
	}
	if got := readRecord(t, record); !slices.Equal(got, want) {
		t.Errorf("executions %q, want %q", got, want)
	}
}

// TestFoldedKeysWarnedToApprover (policy44): a held call whose arguments
// hold "path" and "PATH" (one field, the last, to an upstream decoding
// with Go's encoding/json) carries a display warning naming both, in the
// API's display_warnings and in the WARNING block of approvals show. On
// 8308deeb neither said anything.
func TestFoldedKeysWarnedToApprover(t *testing.T) {
	g, _ := startUpstreamGateway(t, heldEchoPolicy)
	cs := g.connect(t, nil, nil)
	ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", `{"path":"/tmp/work/a","PATH":"/etc/shadow"}`))
	p := waitPending(t, g.Admin, 1)[0]
	const want = `$: keys "path" and "PATH" differ only in case`
	status, body, err := adminDo(t.Context(), http.MethodGet, g.Admin+"/v1/approvals/"+p.ID, approverToken, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET approval: %d %v\n%s", status, err, body)
	}
	var api approvalDoc
	if err := json.Unmarshal(body, &api); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(api.DisplayWarnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
		t.Errorf("display_warnings %q: none starts with %q", api.DisplayWarnings, want)
	}
	show := mustCLI(t, g.Admin, "show", p.ID)
	if head, _, _ := strings.Cut(show, "Approval:"); !strings.HasPrefix(show, "WARNING") || !strings.Contains(head, want) {
		t.Errorf("approvals show does not open with a WARNING naming the keys:\n%s", show)
	}
	mustCLI(t, g.Admin, "deny", p.ID, "--reason", "which path?")
	mustIsError(t, await(t, ch))
}
