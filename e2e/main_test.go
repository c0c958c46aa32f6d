// Package e2e holds toolgate's end-to-end tests: the built toolgate binary
// in front of real MCP servers (the npm filesystem and everything servers,
// and e2e/testupstream), driven by a real Go SDK client as the agent, with
// decisions made through the real CLI and admin API as separate processes.
//
// Run with `CGO_ENABLED=1 go test -race -count=1 ./e2e/` (scripts/test.sh
// does). The npm servers come from e2e/node_modules (`npm ci` in e2e/), or
// from the directory in $TOOLGATE_E2E_NODE_MODULES; without them those tests
// skip, unless TOOLGATE_REQUIRE_E2E=1, which makes them fail.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// bins holds the binaries TestMain builds once for every test. It is set
// before m.Run and only read afterwards.
var bins struct {
	toolgate string // cmd/toolgate
	upstream string // e2e/testupstream
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toolgate-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bins.toolgate = filepath.Join(dir, "toolgate")
	bins.upstream = filepath.Join(dir, "testupstream")
	for _, b := range []struct{ out, pkg string }{
		{bins.toolgate, "toolgate/cmd/toolgate"},
		{bins.upstream, "toolgate/e2e/testupstream"},
	} {
		if err := goBuild(b.out, b.pkg); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	if v := os.Getenv("TOOLGATE_E2E_UPSTREAM"); v != "" {
		// a command run in place of e2e/testupstream, e.g. a wrapper that
		// copies the upstream's pipes or times it (docs/performance.md)
		bins.upstream = v
	}
	return m.Run()
}

// goBuild builds pkg into out. When this test binary runs under the race
// detector the binaries are built with -race too, so a data race in the
// gateway process is reported (see checkRace).
func goBuild(out, pkg string) error { return goBuildWith(out, pkg, raceEnabled) }

// goBuildWith builds pkg into out, with the race detector when race is set.
func goBuildWith(out, pkg string, race bool) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("find the go command: %w", err)
	}
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, pkg)...)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", cmd.Args[1:], err, b)
	}
	return nil
}
