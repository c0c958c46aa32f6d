package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// subcommands are every command line of toolgate that takes flags or has
// its own help, as a user types them.
var subcommands = [][]string{
	{"version"},
	{"serve"},
	{"policy"}, {"policy", "check"}, {"policy", "explain"}, {"policy", "test"},
	{"policy", "propose"}, {"policy", "show"}, {"policy", "diff"}, {"policy", "apply"},
	{"approvals"}, {"approvals", "list"}, {"approvals", "show"}, {"approvals", "approve"},
	{"approvals", "deny"}, {"approvals", "watch"},
	{"grants"}, {"grants", "list"}, {"grants", "show"}, {"grants", "revoke"},
	{"audit"}, {"audit", "verify"}, {"audit", "export"},
}

// runCLI runs toolgate (this test binary as the CLI, see TestMain) with
// args as a separate process, with no environment but PATH and an empty
// stdin, and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...) //nolint:gosec // G702: this test binary, with the test's own arguments
	cmd.Env = []string{envCLI + "=1", "PATH=" + os.Getenv("PATH")}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var xe *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &xe):
		code = xe.ExitCode()
	default:
		t.Fatalf("run toolgate %q: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// TestHelpFlagsPrintUsage: -h and --help after any subcommand print that
// subcommand's usage to stdout and exit 0; they never run it ("toolgate
// version -h" printed the version).
func TestHelpFlagsPrintUsage(t *testing.T) {
	for _, sub := range subcommands {
		for _, h := range []string{"-h", "--help"} {
			args := append(append([]string(nil), sub...), h)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runCLI(t, args...)
				if code != 0 {
					t.Errorf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
				}
				if !strings.Contains(strings.ToLower(stdout), "usage") {
					t.Errorf("stdout has no usage:\n%s", stdout)
				}
				if want := "toolgate " + strings.Join(sub, " "); !strings.Contains(stdout, want) {
					t.Errorf("usage does not name %q:\n%s", want, stdout)
				}
				if strings.HasPrefix(stdout, "toolgate dev") || strings.HasPrefix(stdout, "toolgate v") {
					t.Errorf("printed a version, not the usage:\n%s", stdout)
				}
			})
		}
	}
}

// TestBadFlagsExitUsage: an undefined flag after any subcommand exits 2
// (DESIGN.md: "2 usage or invalid config"), says so on stderr, prints
// nothing on stdout and runs nothing; so do arguments to version.
func TestBadFlagsExitUsage(t *testing.T) {
	cases := [][]string{{"version", "extra"}, {"--no-such-command"}}
	for _, sub := range subcommands {
		cases = append(cases, append(append([]string(nil), sub...), "--no-such-flag"))
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if stderr == "" {
				t.Error("stderr is empty: the user is not told what was wrong")
			}
		})
	}
}
