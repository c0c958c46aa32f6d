// Package diskcheck holds the tests of scripts/test.sh's free-space check
// (tg_check_disk in scripts/lib.sh, branch flake51): a run on a nearly full
// disk stops before it starts, naming the directory, the free space and
// how to free it.
package diskcheck

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const repoRoot = "../.."

// fakeDF writes a df that reports every directory on the file system
// mounted at mount with kb KiB available, and returns the PATH that finds
// it first.
func fakeDF(t *testing.T, kb, mount string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n" +
		"echo 'Filesystem 1024-blocks Used Available Capacity Mounted on'\n" +
		"echo \"/dev/fake 262144000 1000 " + kb + " 99% " + mount + "\"\n"
	if err := os.WriteFile(filepath.Join(dir, "df"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// checkDisk runs tg_check_disk with args from scripts/lib.sh under path
// and returns its stderr and whether it succeeded.
func checkDisk(t *testing.T, path string, args ...string) (stderr string, ok bool) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{"-c", `set -euo pipefail; source "$0"; tg_check_disk "$@"`, filepath.Join(root, "scripts", "lib.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+path, "TG_SCRIPT=scripts/test.sh")
	var errb strings.Builder
	cmd.Stderr = &errb
	err = cmd.Run()
	if _, isExit := errors.AsType[*exec.ExitError](err); err != nil && !isExit {
		t.Fatal(err)
	}
	return errb.String(), err == nil
}

// TestTestShStopsWhenTheDiskIsNearlyFull: scripts/test.sh on a disk with
// 1 GiB free fails in its first step, before it installs or builds
// anything, and says which directory, how much is free and how to free it.
func TestTestShStopsWhenTheDiskIsNearlyFull(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "go-build")
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "test.sh"))
	cmd.Dir = root
	// A Chromium that is not there: were the check gone, the run would
	// stop at the chromium step rather than go on to the whole suite.
	cmd.Env = append(os.Environ(), "PATH="+fakeDF(t, "1048576", "/"), "GOCACHE="+cache, "TOOLGATE_MIN_FREE_GB=10",
		"TOOLGATE_CHROMIUM="+filepath.Join(t.TempDir(), "no-chromium"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("scripts/test.sh succeeded with 1 GiB free:\n%s", out)
	}
	text := string(out)
	for _, want := range []string{
		"1.0 GiB free on /, which holds " + cache + " (the Go build cache)",
		"a run needs 10 GiB (TOOLGATE_MIN_FREE_GB=10; 0 skips this check)",
		"go clean -cache",
		"FAILED in step 'disk space'",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "npm deps") {
		t.Errorf("scripts/test.sh went on past the disk check:\n%s", text)
	}
	// One file system holds them all: it is named once.
	if n := strings.Count(text, "GiB free on"); n != 1 {
		t.Errorf("%d lines name a short file system, want 1 (one file system):\n%s", n, text)
	}
}

func TestCheckDisk(t *testing.T) {
	tmp := t.TempDir()
	for _, tc := range []struct {
		name, kb, minGB string
		ok              bool
		say             string
	}{
		{"enough", "52428800", "10", true, ""},
		{"just enough", "10485760", "10", true, ""},
		{"a KiB short", "10485759", "10", false, "GiB free on /fake, which holds " + tmp + "/not/yet (TMPDIR)"},
		{"9 GiB", "9437184", "10", false, "9.0 GiB free on /fake"},
		{"check off", "0", "0", true, ""},
		{"not a number", "52428800", "ten", false, "TOOLGATE_MIN_FREE_GB=ten is not a whole number of GiB"},
		// Decimal, not octal: 08 is 8 GiB (on a11358f8 bash's arithmetic
		// failed on it and the check passed whatever was free).
		{"leading zero", "7340032", "08", false, "7.0 GiB free on /fake"},
		{"leading zero, enough", "9437184", "08", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stderr, ok := checkDisk(t, fakeDF(t, tc.kb, "/fake"), tc.minGB, "TMPDIR="+tmp+"/not/yet", "empty=")
			if ok != tc.ok || !strings.Contains(stderr, tc.say) {
				t.Errorf("tg_check_disk %s with %s KiB free: ok %v, stderr %q; want ok %v, saying %q", tc.minGB, tc.kb, ok, stderr, tc.ok, tc.say)
			}
		})
	}
	// A df that cannot read a file system (it fails, or prints no
	// number) leaves that directory unchecked, says so, and lets the run
	// go on: it does not stop the run under test.sh's set -euo pipefail
	// (on a11358f8 the failing df's pipeline ended the run, unexplained).
	for _, tc := range []struct{ name, script string }{
		{"df fails", "#!/bin/sh\necho 'df: cannot read' >&2\nexit 1\n"},
		{"df prints no number", "#!/bin/sh\necho 'Filesystem 1024-blocks Used Available Capacity Mounted on'\necho '/dev/fake - - - - /fake'\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "df"), []byte(tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			stderr, ok := checkDisk(t, dir+string(os.PathListSeparator)+os.Getenv("PATH"), "10", "TMPDIR="+tmp)
			if !ok || !strings.Contains(stderr, "cannot read the free space of "+tmp+" (df); not checked") {
				t.Errorf("tg_check_disk with %s: ok %v, stderr %q; want ok, saying it was not checked", tc.name, ok, stderr)
			}
		})
	}
	// The real df's output is read too: this machine has more than 0 GiB
	// free, and not 100,000 GiB.
	if stderr, ok := checkDisk(t, os.Getenv("PATH"), "1", "TMPDIR="+tmp); !ok {
		t.Errorf("tg_check_disk 1 with the real df failed: %s", stderr)
	}
	if stderr, ok := checkDisk(t, os.Getenv("PATH"), "100000", "TMPDIR="+tmp); ok || !strings.Contains(stderr, "GiB free on") {
		t.Errorf("tg_check_disk 100000 with the real df: ok %v, %s; want a failure naming the free space", ok, stderr)
	}
}
