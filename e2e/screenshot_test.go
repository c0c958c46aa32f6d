package e2e

import (
	"bytes"
	"context"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// screenshotDir, when set, is where TestInboxScreenshot writes its PNGs
// (the README's pictures: go test ./e2e -run TestInboxScreenshot
// -screenshots ../docs). Without it the pictures are taken and checked,
// and not kept.
var screenshotDir = flag.String("screenshots", "", "write the inbox screenshots (inbox.png, inbox-detail.png) into this directory")

// TestInboxScreenshot takes the README's pictures of the inbox: headless
// Chromium showing real held calls of the npm filesystem server, then the
// detail page of one whose arguments the display copy had to redact.
func TestInboxScreenshot(t *testing.T) {
	n := findNPM(t)
	dir := t.TempDir()
	sandbox := filepath.Join(dir, "sandbox")
	if err := os.MkdirAll(sandbox, 0o700); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: sqlite
  path: `+q(filepath.Join(dir, "toolgate.db"))+`
servers:
  fs:
    command: `+q(n.node)+`
    args: [`+q(n.script(t, "mcp-server-filesystem"))+`, `+q(sandbox)+`]
agents:
  - id: release-bot
    token_env: E2E_AGENT_TOKEN
    on_behalf_of: carol
approvers:
  - id: bob
    token_env: E2E_APPROVER_TOKEN
    roles: [approver]
    groups: [ops]
  - id: dana
    token_sha256: "0000000000000000000000000000000000000000000000000000000000000000"
    roles: [approver]
    groups: [ops]
policy:
  default: deny
  rules:
    - name: writes need approval
      server: fs
      tools: [write_file, create_directory]
      effect: approve
      approval: { timeout: 30m }
    - name: config edits need two
      server: fs
      tools: [edit_file]
      effect: approve
      approval: { timeout: 15m, approvals: 2, approvers: ["group:ops"] }
`, nil)
	cs := g.connect(t, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	calls := []*mcp.CallToolParams{
		{Name: "fs__create_directory", Arguments: map[string]any{"path": "backups/2026-12"}},
		{Name: "fs__edit_file", Arguments: map[string]any{"path": "config/app.yaml", "edits": []map[string]any{{"oldText": "replicas: 2", "newText": "replicas: 8"}}}},
		{Name: "fs__write_file", Arguments: map[string]any{"path": ".env.production", "content": "DATABASE_URL=postgres://app@db/prod\nSTRIPE_KEY=sk_live_51HxQ2eKpW7rT9vB3nM8aZ4cY6dF1gH0j\n"}},
		{Name: "fs__write_file", Arguments: map[string]any{"path": "deploy/release.sh", "content": "#!/bin/sh\nset -eu\ngit tag v2.4.0\n./build.sh --release && ./push.sh production\n"}},
	}
	for i, c := range calls {
		callAsync(ctx, cs, c)
		waitPending(t, g.Admin, i+1)
	}
	detailID := ""
	for _, a := range approvals(t, g.Admin, "pending") {
		if a.Tool == "write_file" && bytes.Contains(a.Arguments, []byte(".env.production")) {
			detailID = a.ID
		}
	}

	b := newBrowser(t)
	b.signIn(g.Admin, approverToken)
	b.wait(waitFor(t), "four held calls", css(`.cards > li:nth-child(4)`))
	b.clean()
	shoot(t, b, "inbox.png")

	b.open(g.Admin, "/ui/approvals/"+detailID)
	b.wait(waitFor(t), "the warnings", css(`.warnings`))
	shoot(t, b, "inbox-detail.png")
	b.clean()
}

// shoot takes a full-page PNG of the tab, checks it decodes, and writes it
// to -screenshots when set.
func shoot(t *testing.T, b *browser, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor(t))
	defer cancel()
	// Fixed countdown text would be nicer for diffs, but the picture shows
	// the page as it is: time left included.
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if sz := img.Bounds().Size(); sz.X < 800 || sz.Y < 400 {
		t.Errorf("screenshot %s is %v, too small", name, sz)
	}
	if *screenshotDir == "" {
		return
	}
	path := filepath.Join(*screenshotDir, name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes) at %s", path, len(buf), time.Now().UTC().Format(time.RFC3339))
}
