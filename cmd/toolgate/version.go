package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// versionCmd is "toolgate version": it prints "toolgate " and the
// buildInfo, exit 0. It takes no flags or arguments: -h/--help prints its
// usage to stdout (exit 0), anything else its usage to stderr (exit 2).
func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	usage := func(w io.Writer) {
		fmt.Fprint(w, "Usage: toolgate version\n\n"+
			"Prints this binary's version (and, when the Go toolchain stamped it, the commit and its time).\n"+
			"Exit status: 0 ok, 2 usage.\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0
		}
		fmt.Fprintln(stderr, "toolgate: version:", err)
		usage(stderr)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolgate: version takes no arguments, got %q\n", fs.Args())
		usage(stderr)
		return 2
	}
	fmt.Fprintln(stdout, "toolgate", buildVersion())
	return 0
}

// version is set at build time with -ldflags "-X main.version=..."; a
// linked-in version wins over the build information. Empty when none was
// linked in (see buildVersion).
var version string

// A buildInfo says which build this binary is: its version and, when the
// Go toolchain stamped them (a build inside a git checkout), the commit,
// its time and whether the tree had uncommitted changes.
type buildInfo struct {
	Version  string // "dev" when nothing better is known
	Revision string
	Time     string
	Modified bool
}

// String is the line "toolgate version" prints after the name:
// "v1.2.3", or "v0.0.0-2026…-abc123 (revision abc123…, 2026-12-03T10:00:00Z, modified)".
func (b buildInfo) String() string {
	var extra []string
	if b.Revision != "" {
		extra = append(extra, "revision "+b.Revision)
	}
	if b.Time != "" {
		extra = append(extra, b.Time)
	}
	if b.Modified {
		extra = append(extra, "modified")
	}
	if len(extra) == 0 {
		return b.Version
	}
	return b.Version + " (" + strings.Join(extra, ", ") + ")"
}

// buildVersion is this binary's buildInfo: the version linked in with
// -ldflags, else the main module's version from the build information
// (a `go install toolgate/cmd/toolgate@v1.2.3` build says v1.2.3, a
// build in a checkout a pseudo-version), with the vcs.* settings when
// present.
func buildVersion() buildInfo { return versionOf(version, debug.ReadBuildInfo) }

// versionOf is buildVersion with the linked-in version and the build
// information's reader given.
func versionOf(linked string, read func() (*debug.BuildInfo, bool)) buildInfo {
	b := buildInfo{Version: linked}
	bi, ok := read()
	if ok && bi != nil {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
}
