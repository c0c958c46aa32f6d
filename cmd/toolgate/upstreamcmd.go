package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"toolgate/internal/config"
)

// commandWarnings names each stdio upstream whose command cannot be
// started as serve would start it: a bare name found in no directory of
// PATH (serve's own, which exec searches), or a path (relative to the
// server's dir) that is not an executable file. serve still starts and
// keeps retrying such an upstream, which is why this is a warning: the
// command may appear later (a package being installed), but usually it is
// a typo, and `policy check` is where to say so.
func commandWarnings(cfg config.Config, sys system) []string {
	var out []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range cfg.Servers {
			if !yield(n) {
				return
			}
		}
	}) {
		cmd := cfg.Servers[name].Command
		if cmd == "" {
			continue
		}
		if !strings.Contains(cmd, "/") {
			path, _ := sys.lookupEnv("PATH")
			if !inPath(cmd, path) {
				out = append(out, fmt.Sprintf("servers.%s.command %q is not in PATH (%s): serve starts without this upstream (its tools are missing) and keeps retrying it; install it, or give its absolute path", name, cmd, path))
			}
			continue
		}
		p := cmd
		if dir := cfg.Servers[name].Dir; !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			from := "the working directory"
			if filepath.IsAbs(cmd) {
				from = ""
			} else if dir := cfg.Servers[name].Dir; dir != "" {
				from = "servers." + name + ".dir"
			}
			if from != "" {
				from = " (a relative command is found from " + from + ")"
			}
			out = append(out, fmt.Sprintf("servers.%s.command %q does not exist%s: serve starts without this upstream (its tools are missing) and keeps retrying it; fix the path", name, cmd, from))
		} else if !isExecutable(p) {
			out = append(out, fmt.Sprintf("servers.%s.command %q is not an executable file: serve starts without this upstream (its tools are missing) and keeps retrying it; make it executable, or fix the path", name, cmd))
		}
	}
	return out
}

// inPath reports whether an executable file called name is in one of the
// directories of path (a PATH value). An empty entry is the working
// directory, as exec.LookPath refuses to use it: it is skipped.
func inPath(name, path string) bool {
	for _, dir := range filepath.SplitList(path) {
		if dir != "" && isExecutable(filepath.Join(dir, name)) {
			return true
		}
	}
	return false
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
