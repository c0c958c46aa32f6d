package config

import (
	"strings"
	"testing"
)

// TestWarnsOfExposedToolNameInRule: agents see "fs__move_file", and a rule
// written with that name matches nothing (rules match the real name
// "move_file"), so a deny rule would silently not deny. It is a warning;
// the real name is not.
func TestWarnsOfExposedToolNameInRule(t *testing.T) {
	cfg := mustLoad(t, `servers:
  fs: { command: x }
policy:
  default: allow
  rules:
    - { name: no moves, server: fs, tools: [fs__move_file], effect: deny }
    - { name: no deletes, server: fs, tools: [delete_file], effect: deny }
`, nil)
	want := `policy.rules[0] "no moves": tools[0] "fs__move_file" is the name agents see for server "fs"'s tool; rules match the real tool name ("move_file")`
	var hits int
	for _, w := range cfg.Warnings() {
		if strings.Contains(w, want) {
			hits++
		}
		if strings.Contains(w, "delete_file") {
			t.Errorf("a real tool name is warned about: %q", w)
		}
	}
	if hits != 1 {
		t.Errorf("warnings %q, want one containing %q", cfg.Warnings(), want)
	}
}
