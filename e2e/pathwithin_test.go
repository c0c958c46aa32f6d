package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFilesystemPathWithin: newuser7's finding with the real npm
// filesystem server, allowed a root holding work/ and out/. An allow rule
// for writes `when: args.path.startsWith(work + "/")` lets
// work/../out/x.txt write into out/ without an approval (the server
// resolves the ".."); the same rule written with path.within(args.path,
// work) allows writes under work/ at once and holds that write, and a
// relative path, for a human (the default, approve), who denies them:
// nothing is written.
func TestFilesystemPathWithin(t *testing.T) {
	n := findNPM(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	work, out := filepath.Join(root, "work"), filepath.Join(root, "out")
	for _, d := range []string{work, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	server := func(name string) string {
		return "  " + name + ":\n    command: " + q(n.node) + "\n    args: [" + q(n.script(t, "mcp-server-filesystem")) + ", " + q(root) + "]\n" +
			"    call_timeout: 60s\n    client_capabilities: [sampling, elicitation]\n"
	}
	cfg := gatewayConfig(filepath.Join(t.TempDir(), "toolgate.db"), "servers:\n"+server("naive")+server("fs")+`
policy:
  default: approve
  approval: { timeout: 5m, mode: hold, approvals: 1, valid_for: 10m }
  rules:
    - name: scratch writes by prefix
      server: naive
      tools: [write_file]
      when: 'args.path.startsWith(`+q(work+"/")+`)'
      effect: allow
    - name: scratch writes
      server: fs
      tools: [write_file]
      when: 'path.within(args.path, `+q(work)+`)'
      effect: allow
`)
	g := startGateway(t, cfg, nil)
	cs := g.connect(t, nil, nil)
	write := func(server, path string) *mcp.CallToolParams {
		p := writeParams(path, "written by "+server)
		p.Name = server + "__write_file"
		return p
	}

	// The string prefix: the write lands outside work/, unasked.
	escaped := filepath.Join(out, "naive.txt")
	mustOK(t, await(t, callAsync(t.Context(), cs, write("naive", work+"/../out/naive.txt"))))
	if _, err := os.Stat(escaped); err != nil {
		t.Errorf("the prefix rule's write through work/..: %v; the finding no longer reproduces, so this test shows nothing", err)
	}

	// path.within: a write under work/ runs at once.
	inside := filepath.Join(work, "sub.txt")
	mustOK(t, await(t, callAsync(t.Context(), cs, write("fs", inside))))
	if got, err := os.ReadFile(inside); err != nil || string(got) != "written by fs" {
		t.Errorf("the write under work/: %q, %v", got, err)
	}
	if got := approvals(t, g.Admin, "all"); len(got) != 0 {
		t.Errorf("the write under work/ created approvals: %+v", got)
	}

	// The escaping and the relative write wait for a human, who denies them.
	for _, path := range []string{work + "/../out/within.txt", "work/relative.txt"} {
		ch := callAsync(t.Context(), cs, write("fs", path))
		p := waitPending(t, g.Admin, 1)[0]
		if p.Server != "fs" || p.Tool != "write_file" || p.Rule != "default" {
			t.Errorf("%s: pending %+v, want fs/write_file held by the default", path, p)
		}
		mustCLI(t, g.Admin, "deny", p.ID, "--reason", "outside work/")
		if msg := mustIsError(t, await(t, ch)); !strings.Contains(msg, "outside work/") {
			t.Errorf("%s: the denied call says %q", path, msg)
		}
	}
	mustNotExist(t, filepath.Join(out, "within.txt"))
	mustNotExist(t, filepath.Join(work, "relative.txt"))
	mustNotExist(t, filepath.Join(root, "relative.txt"))
}
