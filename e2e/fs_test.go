package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fsConfig is a gateway in front of the npm filesystem server confined to
// sandbox, with the policy of examples/quickstart.yaml; writes wait for a
// human for writeTimeout.
func fsConfig(t *testing.T, n npm, sandbox, writeTimeout string) string {
	t.Helper()
	return gatewayConfig(filepath.Join(t.TempDir(), "toolgate.db"), `
servers:
  fs:
    command: `+q(n.node)+`
    args: [`+q(n.script(t, "mcp-server-filesystem"))+`, `+q(sandbox)+`]
    call_timeout: 60s
    client_capabilities: [sampling, elicitation]
approvals:
  sweep_interval: 100ms
policy:
  default: approve
  approval: { timeout: 5m, mode: hold, approvals: 1, valid_for: 10m }
  rules:
    - name: read-only filesystem
      server: fs
      tools: [read_*, list_*, directory_tree, search_files, get_file_info]
      effect: allow
    - name: never delete
      tools: ["*delete*"]
      effect: deny
    - name: no moves
      server: fs
      tools: [move_file]
      effect: deny
    - name: writes need approval
      server: fs
      tools: [write_file, edit_file, create_directory]
      effect: approve
      approval: { timeout: `+writeTimeout+` }
`)
}

// writeParams is an fs__write_file call.
func writeParams(path, content string) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "fs__write_file", Arguments: map[string]any{"path": path, "content": content}}
}

// mustNotExist fails if path exists.
func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s: %v, want it not to exist (nothing written)", path, err)
	}
}

// TestFilesystem runs the quickstart policy against the real npm filesystem
// server: an allowed read, a held write released through the CLI, a write
// denied through the CLI, and a write whose approval times out.
func TestFilesystem(t *testing.T) {
	n := findNPM(t)
	sandbox, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, fsConfig(t, n, sandbox, "5m"), nil)
	cs := g.connect(t, nil, nil)

	t.Run("read is allowed", func(t *testing.T) {
		start := time.Now()
		defer elapsed(t, "allowed read", start)
		const content = "hello from the e2e sandbox\nline two\n"
		path := filepath.Join(sandbox, "hello.txt")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		r := await(t, callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "fs__read_text_file", Arguments: map[string]any{"path": path}}))
		if got := mustOK(t, r); got != content {
			t.Errorf("read_text_file = %q, want %q", got, content)
		}
		if got := approvals(t, g.Admin, "all"); len(got) != 0 {
			t.Errorf("an allowed read created approvals: %+v", got)
		}
	})

	t.Run("write approved through the CLI", func(t *testing.T) {
		start := time.Now()
		defer elapsed(t, "held write, approved via CLI", start)
		const content = "exact bytes: é <&> \"quoted\" \\ tab\t end\n"
		path := filepath.Join(sandbox, "approved.txt")
		ch := callAsync(t.Context(), cs, writeParams(path, content))

		p := waitPending(t, g.Admin, 1)[0]
		if p.Server != "fs" || p.Tool != "write_file" || p.Rule != "writes need approval" || p.RequestedBy != agentID {
			t.Errorf("pending approval = %+v, want fs/write_file by %s under \"writes need approval\"", p, agentID)
		}
		var shown struct{ Path, Content string }
		if err := json.Unmarshal(p.Arguments, &shown); err != nil || shown.Path != path || shown.Content != content {
			t.Errorf("pending approval shows arguments %s (err %v), want path %q and the content sent", p.Arguments, err, path)
		}
		mustNotExist(t, path) // nothing runs before the decision
		held := time.Since(start)

		out := mustCLI(t, g.Admin, "approve", p.ID)
		if !strings.Contains(out, p.ID) || !strings.Contains(out, "approved") {
			t.Errorf("approve printed %q, want the id and the new state", out)
		}
		mustOK(t, await(t, ch))
		t.Logf("timing: held after %v; released %v after the approve command started", held.Round(time.Millisecond), (time.Since(start) - held).Round(time.Millisecond))

		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("after approval: %v", err)
		}
		if string(got) != content {
			t.Errorf("file holds %q, want exactly %q", got, content)
		}
		a := showJSON(t, g.Admin, p.ID)
		if a.State != "consumed" || a.DecidedBy != approverID || a.DispatchOutcome != "ok" {
			t.Errorf("record after dispatch: state %q, decided_by %q, dispatch_outcome %q; want consumed, %s, ok", a.State, a.DecidedBy, a.DispatchOutcome, approverID)
		}
	})

	t.Run("write denied through the CLI", func(t *testing.T) {
		start := time.Now()
		defer elapsed(t, "held write, denied via CLI", start)
		const reason = "not part of today's change window"
		path := filepath.Join(sandbox, "denied.txt")
		ch := callAsync(t.Context(), cs, writeParams(path, "should never land"))

		p := waitPending(t, g.Admin, 1)[0]
		mustCLI(t, g.Admin, "deny", p.ID, "--reason", reason)
		msg := mustIsError(t, await(t, ch))
		if !strings.Contains(msg, reason) {
			t.Errorf("denied call says %q, want it to contain the reason %q", msg, reason)
		}
		if strings.Contains(msg, "timed out") {
			t.Errorf("denied call says %q: a denial must not read as a timeout", msg)
		}
		mustNotExist(t, path)
		if a := showJSON(t, g.Admin, p.ID); a.State != "denied" || a.Reason != reason || a.DecidedBy != approverID {
			t.Errorf("record: state %q, reason %q, decided_by %q; want denied, %q, %s", a.State, a.Reason, a.DecidedBy, reason, approverID)
		}
	})

	t.Run("write times out", func(t *testing.T) {
		// A gateway of its own: the write rule's timeout is 2s here.
		g := startGateway(t, fsConfig(t, n, sandbox, "2s"), nil)
		cs := g.connect(t, nil, nil)
		start := time.Now()
		defer elapsed(t, "held write, timed out (rule timeout 2s)", start)
		path := filepath.Join(sandbox, "expired.txt")
		msg := mustIsError(t, await(t, callAsync(t.Context(), cs, writeParams(path, "too late"))))
		if !strings.Contains(msg, "timed out") {
			t.Errorf("expired call says %q, want it to say \"timed out\"", msg)
		}
		if strings.Contains(msg, "denied") {
			t.Errorf("expired call says %q: a timeout must never read as denied", msg)
		}
		mustNotExist(t, path)

		all := approvals(t, g.Admin, "all")
		if len(all) != 1 {
			t.Fatalf("approvals = %+v, want exactly one", all)
		}
		if !strings.Contains(msg, all[0].ID) {
			t.Errorf("expired call says %q, want it to name approval %s", msg, all[0].ID)
		}
		if a := showJSON(t, g.Admin, all[0].ID); a.State != "expired" || a.DecidedBy != "" {
			t.Errorf("record: state %q, decided_by %q; want expired and no decider", a.State, a.DecidedBy)
		}
		// A late decision conflicts and runs nothing.
		if r := cli(t, g.Admin, "approve", all[0].ID); r.Code != 1 {
			t.Errorf("approve after expiry: exit %d, want 1\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		mustNotExist(t, path)
	})
}

// TestFilesystemRoots: the filesystem server takes its directories from
// its client's roots when the client offers roots. Through toolgate its
// roots/list reaches the agent whose session it serves, so by default an
// agent's roots become the server's directories, as they would directly;
// with client_capabilities leaving out roots (as the quickstart does) the
// server keeps the sandbox it was started with.
func TestFilesystemRoots(t *testing.T) {
	n := findNPM(t)
	for _, tc := range []struct {
		name        string
		offerRoots  bool
		wantOutside bool
	}{
		{"roots offered", true, true},
		{"roots not offered (quickstart)", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sandbox, outside := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := fsConfig(t, n, sandbox, "1m")
			if tc.offerRoots {
				cfg = strings.Replace(cfg, "    client_capabilities: [sampling, elicitation]\n", "", 1)
			}
			g := startGateway(t, cfg, nil)
			asked := make(chan struct{}, 4)
			opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}}}
			c := mcp.NewClient(&mcp.Implementation{Name: "roots-agent", Version: "1"}, opts)
			c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if method == "roots/list" {
						asked <- struct{}{}
					}
					return next(ctx, method, req)
				}
			})
			c.AddRoots(&mcp.Root{URI: "file://" + outside})
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.MCP, HTTPClient: &http.Client{Transport: &bearer{token: agentToken, base: g.tr}}}, era2025)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cs.Close() }()
			allowed := func() string {
				t.Helper()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs__list_allowed_directories", Arguments: map[string]any{}})
				if err != nil {
					t.Fatal(err)
				}
				return text(res)
			}
			first := allowed() // opens the agent session's own server process
			if !tc.wantOutside {
				if strings.Contains(first, outside) {
					t.Errorf("the agent's roots became the server's directories: %s", first)
				}
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs__read_text_file", Arguments: map[string]any{"path": filepath.Join(outside, "secret.txt")}})
				if err != nil || !res.IsError {
					t.Errorf("reading outside the sandbox = %+v %v, want an access error", res, err)
				}
				select {
				case <-asked:
					t.Error("the agent was asked for its roots although toolgate does not offer roots")
				default:
				}
				return
			}
			select {
			case <-asked:
			case <-time.After(waitFor(t)):
				t.Fatal("the server's roots/list never reached the agent")
			}
			deadline := time.Now().Add(waitFor(t))
			for got := first; !strings.Contains(got, outside); got = allowed() {
				if time.Now().After(deadline) {
					t.Fatalf("the server's directories stayed %q, want the agent's root %s", got, outside)
				}
				time.Sleep(pollEvery)
			}
		})
	}
}
