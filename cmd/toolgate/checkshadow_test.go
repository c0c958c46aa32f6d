package main

import (
	"strings"
	"testing"

	"toolgate/internal/cli"
	"toolgate/internal/config"
)

// TestCheckWarnsAboutShadowedRules: policy check warns about an allow rule
// that an approve rule without a condition covers (the docs' example of an
// allow that never wins), naming both rules with the file's lines, and
// still exits 0; it says nothing when the approve rule's own condition
// makes it undecidable, and a policy with path.within loads and is
// explained (policy explain --config).
func TestCheckWarnsAboutShadowedRules(t *testing.T) {
	head := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n" + principals + `servers:
  fs: { url: "http://127.0.0.1:9/mcp" }
policy:
  default: approve
  rules:
    - name: writes
      server: fs
      tools: [write_file, edit_file]
`
	allow := `    - name: scratch writes
      server: fs
      tools: [write_file]
      when: path.within(args.path, "/tmp/work")
      effect: allow
`
	path := writeConfig(t, head+"      effect: approve\n"+allow)
	var stdout, stderr strings.Builder
	code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil))
	want := `warning: ` + path + `:17: policy.rules[1] "scratch writes" (allow) never decides a call: policy.rules[0] "writes" (approve, ` + path + `:13) matches every call it matches, and approve beats allow`
	if code != 0 || !strings.Contains(stderr.String(), want) {
		t.Errorf("policy check exited %d\nstderr:\n%s\nwant exit 0 and\n%s", code, stderr.String(), want)
	}

	// A path tested by string prefix draws a warning with its line.
	prefix := writeConfig(t, head+"      when: '!args.path.startsWith(\"/tmp/work/\")'\n      effect: approve\n"+allow)
	stderr.Reset()
	want = `warning: ` + prefix + `:16: policy.rules[0] "writes": when tests the string prefix "/tmp/work/", which also holds for "/tmp/work/../elsewhere"`
	if code := checkCmd([]string{prefix}, &stdout, &stderr, testSystem(nil)); code != 0 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "never decides") {
		t.Errorf("with a prefix condition: exit %d\n%s\nwant\n%s", code, stderr.String(), want)
	}

	path = writeConfig(t, head+"      when: '!path.within(args.path, \"/tmp/work\")'\n      effect: approve\n"+allow)
	stderr.Reset()
	if code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil)); code != 0 || strings.Contains(stderr.String(), "warning") {
		t.Errorf("with the opposite condition on the approve rule: exit %d\n%s", code, stderr.String())
	}

	env := config.MapEnv(map[string]string{"CMD_TEST_AGENT_TOKEN": testAgentToken, "CMD_TEST_APPROVER_TOKEN": testApproverToken})
	for args, want := range map[string]string{
		`{"path":"/tmp/work/a.txt"}`:    `effect:      allow, decided by rule "scratch writes"`,
		`{"path":"/tmp/work/../etc/x"}`: `evaluation error (path.within: the path has a '..' segment)`,
	} {
		var out, errOut strings.Builder
		code := cli.RunExplain(t.Context(), []string{"--config", path, "--server", "fs", "--tool", "write_file", "--args", args}, &out, &errOut, env)
		if code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("policy explain %s: exit %d\n%s%s\nwant %q", args, code, out.String(), errOut.String(), want)
		}
		if strings.Contains(args, "..") && !strings.Contains(out.String(), `effect:      approve, decided by rule "writes"`) {
			t.Errorf("policy explain %s: not held by the approve rule\n%s", args, out.String())
		}
	}
}

// TestCheckWarnsAboutAnOverruledExactCall (newuser46): docs/policy.md's
// "Allowing a call no command rule allows" with the exception left out of
// the deny rule passed policy check, and the one call the allow rule names
// was denied. Check warns, naming both rules with their lines and what to
// add; the docs' block as written draws nothing.
func TestCheckWarnsAboutAnOverruledExactCall(t *testing.T) {
	head := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n" + principals + `servers:
  shell: { url: "http://127.0.0.1:9/mcp" }
policy:
  default: approve
  rules:
    - name: restore dotfiles
      server: shell
      tools: [run]
      principals: [agent-1]
      when: 'args == {"command": "cp -r dotfiles/. ~"}'
      effect: allow
    - name: no rm
      server: shell
      tools: [run]
      command: { argument: command, match: ["rm *"] }
      effect: deny
`
	path := writeConfig(t, head)
	var stdout, stderr strings.Builder
	code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil))
	want := `warning: ` + path + `:13: policy.rules[0] "restore dotfiles" (allow) never allows the one call its when names from "agent-1": policy.rules[1] "no rm" (deny, ` + path + `:19) matches it too, and deny beats allow; a command rule matches every call it cannot read: add the same exception to its when`
	if code != 0 || !strings.Contains(stderr.String(), want) {
		t.Errorf("policy check exited %d\nstderr:\n%s\nwant exit 0 and\n%s", code, stderr.String(), want)
	}

	path = writeConfig(t, head+"      when: 'args != {\"command\": \"cp -r dotfiles/. ~\"}'\n")
	stderr.Reset()
	if code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil)); code != 0 || strings.Contains(stderr.String(), "warning") {
		t.Errorf("with the exception: exit %d\n%s", code, stderr.String())
	}
}

// TestCheckWarnsAboutAnOverruledFamily (policy47): the documented family
// form (size(args) == 1 && args.command.matches('^…$')) with the
// exception left out of the deny rule passed policy check, and every call
// of the family was denied. Check warns, quoting a call the pattern
// admits; with the exception it says nothing.
func TestCheckWarnsAboutAnOverruledFamily(t *testing.T) {
	head := "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n" + principals + `servers:
  shell: { url: "http://127.0.0.1:9/mcp" }
policy:
  default: approve
  rules:
    - name: migrations
      server: shell
      tools: [run]
      when: 'size(args) == 1 && args.command.matches("^psql -d app < migrations/[0-9]{4}_[a-z_]+[.]sql$")'
      effect: allow
    - name: no rm
      server: shell
      tools: [run]
      command: { argument: command, match: ["rm *"] }
      effect: deny
`
	path := writeConfig(t, head)
	var stdout, stderr strings.Builder
	code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil))
	want := `warning: ` + path + `:13: policy.rules[0] "migrations" (allow) never allows "psql -d app < migrations/0000__.sql", a call its when admits: policy.rules[1] "no rm" (deny, ` + path + `:18) matches it too, and deny beats allow; a command rule matches every call it cannot read: add the same exception to its when`
	if code != 0 || !strings.Contains(stderr.String(), want) {
		t.Errorf("policy check exited %d\nstderr:\n%s\nwant exit 0 and\n%s", code, stderr.String(), want)
	}

	path = writeConfig(t, head+"      when: '!(size(args) == 1 && args.command.matches(\"^psql -d app < migrations/[0-9]{4}_[a-z_]+[.]sql$\"))'\n")
	stderr.Reset()
	if code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil)); code != 0 || strings.Contains(stderr.String(), "warning") {
		t.Errorf("with the exception: exit %d\n%s", code, stderr.String())
	}
}
