package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainNotesAnExposedToolName: agents see tools as <server>__<tool>,
// so a user naturally passes that to --tool; rules match the real name, so
// the explanation (of a tool that does not exist) comes with a note that
// names the right flag value. The real name gets no note.
func TestExplainNotesAnExposedToolName(t *testing.T) {
	dir := writeFiles(t, map[string]string{"toolgate.yaml": testConfig})
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		tool string
		note bool
	}{{"pay__transfer", true}, {"transfer", false}} {
		var out, errb bytes.Buffer
		code := RunExplain(t.Context(), []string{"--config", filepath.Join(dir, "toolgate.yaml"), "--server", "pay", "--tool", tc.tool},
			&out, &errb, noEnv)
		if code != ExitOK {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
		want := `note: --tool "pay__transfer" is the name agents see; rules match the real tool name: --tool "transfer"`
		if got := strings.Contains(errb.String(), want); got != tc.note {
			t.Errorf("--tool %s: stderr %q; want the note %v", tc.tool, errb.String(), tc.note)
		}
	}
}
