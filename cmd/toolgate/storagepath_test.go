package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoragePathDirectoryMustExist (fixes29): a configured SQLite
// storage.path whose directory does not exist (a typo) is refused by
// serve (exit 2, nothing created) and reported by policy check, naming
// the key and the path; so is one whose "directory" is a file. A path in
// an existing directory passes, and so does the default path, whose
// directory (./data) serve creates on its first start.
func TestStoragePathDirectoryMustExist(t *testing.T) {
	listen := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\n"
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "toolgat", "toolgate.db")
	tests := []struct {
		name, path string
		want       string // "" when accepted
	}{
		{"directory missing", missing, `storage.path "` + missing + `": directory ` + filepath.Dir(missing) + ` does not exist`},
		{"two levels missing", filepath.Join(dir, "no", "such", "toolgate.db"), "does not exist"},
		{"directory is a file", filepath.Join(file, "toolgate.db"), "is not a directory"},
		{"directory exists", filepath.Join(dir, "toolgate.db"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, listen+"storage: { path: "+tt.path+" }\n"+principals)
			sys := testSystem(nil)
			var stdout, stderr strings.Builder
			code := checkCmd([]string{path}, &stdout, &stderr, sys)
			if tt.want == "" {
				if code != 0 || strings.Contains(stderr.String(), "storage.path") {
					t.Errorf("policy check exited %d, want 0\nstderr:\n%s", code, stderr.String())
				}
				return
			}
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("policy check exited %d, want 2 naming %q\nstderr:\n%s", code, tt.want, stderr.String())
			}
			// A context already done: a serve that accepted the config
			// returns at once (with the directory created) instead of
			// serving.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			err := serveWith(ctx, []string{"--config", path},
				serveIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, sys: sys})
			if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("serve = %v, want an invalid-config error (exit 2) naming %q", err, tt.want)
			}
			if _, err := os.Stat(filepath.Dir(tt.path)); !errors.Is(err, os.ErrNotExist) && !strings.Contains(tt.want, "not a directory") {
				t.Errorf("serve created %s (stat: %v)", filepath.Dir(tt.path), err)
			}
		})
	}

	t.Run("default path", func(t *testing.T) {
		t.Chdir(t.TempDir()) // no ./data here
		path := writeConfig(t, listen+principals)
		var stdout, stderr strings.Builder
		if code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil)); code != 0 {
			t.Errorf("policy check of the default storage.path exited %d, want 0\nstderr:\n%s", code, stderr.String())
		}
	})
}
