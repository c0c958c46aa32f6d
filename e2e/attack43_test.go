package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// attack43Policy allows echo_raw when its command argument is a list of
// printf, test, ls, true and set commands, denies it when the command runs
// rm, and denies everything else by default.
const attack43Policy = `
policy:
  default: deny
  rules:
    - name: harmless builtins
      server: t
      tools: [echo_raw]
      command: {argument: command, match: ["printf *", "test *", "ls *", "true", "set *"]}
      effect: allow
    - name: no rm
      server: t
      tools: [echo_raw]
      command: {argument: command, match: ["rm *"]}
      effect: deny
`

// TestShellStringsThatRunHiddenCode (attack43) calls a tool through the
// binary with command strings that make bash run rm although no simple
// command in them is rm: an array subscript in a name printf -v or test -v
// evaluates, PS4 under set -x, hash -p rebinding ls. On 812d89d0 the
// allow rule let each one run (the upstream recorded it); each must be
// denied and never reach the upstream. A harmless printf and ls still run.
func TestShellStringsThatRunHiddenCode(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	g := startGateway(t, gatewayConfig(filepath.Join(dir, "tg.db"), upstreamServer(record)+attack43Policy), nil)
	cs := g.connect(t, nil, nil)
	args := func(command string) string {
		b, err := json.Marshal(map[string]string{"command": command})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []string{
		"printf -v 'a[$(rm -rf ~)]' x",
		"printf -v x 'b\\x5b\\x24(rm -rf ~)]'; printf -v 'a[x]' y",
		"test -v 'a[$(rm -rf ~)]'",
		"printf -v PS4 '%s' '$(rm -rf ~)'; set -x; true",
		"hash -p /bin/rm ls; ls -rf ~",
	} {
		msg := mustIsError(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", args(c)))))
		if !strings.Contains(msg, "denied") {
			t.Errorf("command %q: %q, want a denial", c, msg)
		}
	}
	ok := args("printf '%s' hi; ls -l")
	mustOK(t, await(t, callAsync(t.Context(), cs, toolCall("t__echo_raw", ok))))
	if got, want := readRecord(t, record), []string{"echo_raw " + ok}; !slices.Equal(got, want) {
		t.Errorf("executions %q, want %q", got, want)
	}
}
