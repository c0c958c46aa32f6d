package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTypeErrorNamesTheKey: a value of the wrong type, whatever the key's
// kind (size, duration, boolean, number, list, map, enum), is reported as
// "FILE:N: key.path: problem", as every other config problem is (tail40:
// a size named its line only, "FILE:5: want a size such as 64MiB"). A bad
// size no longer ends the decoding either: the file's other problems are
// still reported with it.
func TestTypeErrorNamesTheKey(t *testing.T) {
	tests := []struct {
		name, text string
		want       string // the line after "FILE:"
	}{
		{"size as a list", "limits:\n  max_request_bytes: [1]\n",
			"2: limits.max_request_bytes: want a size such as 64MiB"},
		{"size as a mapping", "approvals:\n  result_max_bytes: {a: 1}\n",
			"2: approvals.result_max_bytes: want a size such as 64MiB"},
		{"size in words", "limits:\n  max_result_bytes: lots\n",
			`2: limits.max_result_bytes: "lots" is not a size: want a number of bytes, optionally with a unit (B, KB, MB, GB, KiB, MiB, GiB), such as 64MiB`},
		{"long size shown cut", "limits:\n  max_result_bytes: sk-0123456789abcdef\n",
			`2: limits.max_result_bytes: "sk-0123"… is not a size: want a number of bytes, optionally with a unit (B, KB, MB, GB, KiB, MiB, GiB), such as 64MiB`},
		{"duration as a list", "limits:\n  stdio_write_timeout: [1]\n",
			"2: limits.stdio_write_timeout: want a single value, not a list"},
		{"duration in words", "limits:\n  stdio_write_timeout: soon\n",
			`2: limits.stdio_write_timeout: "soon" is not a duration: write a number with a unit (ms, s, m, h), such as 30s, 5m or 1h30m`},
		{"boolean", "approvals:\n  allow_no_approvers: maybe\n",
			`2: approvals.allow_no_approvers: "maybe" is not true or false`},
		{"number", "limits:\n  max_mcp_sessions: x\n",
			`2: limits.max_mcp_sessions: "x" is not a whole number`},
		{"list as a mapping", "servers:\n  fs:\n    command: x\n    args: {a: 1}\n",
			`4: servers.fs.args: want a list ([a, b], or one "- item" per line), not a mapping of keys to values`},
		{"map as a list", "servers:\n  fs:\n    command: x\n    env: [1]\n",
			`4: servers.fs.env: want a mapping of keys to values, not a list (a "- " starts a list item)`},
		{"enum as a list", "storage:\n  driver: [sqlite]\n",
			"2: storage.driver: want a single value, not a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "toolgate.yaml")
			if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(path, nil)
			want := path + ":" + tt.want
			if lines := Lines(err); !slices.Contains(lines, want) {
				t.Errorf("LoadFile error lines:\n%s\nwant among them:\n%s", strings.Join(lines, "\n"), want)
			}
		})
	}
	t.Run("with other problems", func(t *testing.T) {
		_, err := load(t, "limits:\n  max_request_bytes: [1]\n  max_mcp_sessions: x\nlisten: { amdin: x }\n", nil)
		got := Lines(err)
		for _, want := range []string{
			"line 2: limits.max_request_bytes: want a size such as 64MiB",
			`line 3: limits.max_mcp_sessions: "x" is not a whole number`,
			`line 4: unknown key "amdin" in listen`,
		} {
			if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, want) }) {
				t.Errorf("Load error lines:\n%s\nwant one starting %q", strings.Join(got, "\n"), want)
			}
		}
	})
}
