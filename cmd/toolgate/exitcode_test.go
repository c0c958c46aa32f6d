package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesBadConfigAsConfig: a config serve cannot start with
// exits 2 (the contract: "usage or invalid config") and says so; it is not
// labelled a usage error (the flags were right), and no line repeats the
// file's path. Every kind of problem (unknown key, bad type, bad value,
// a missing file, what preflight finds) is told in one form,
// "toolgate: invalid config: FILE:LINE: problem" (": problem" without a
// line where none is known; ends40: before, a problem the parser found
// came after a line "invalid config: load config:" of its own).
func TestServeRefusesBadConfigAsConfig(t *testing.T) {
	const listen = "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\npolicy: { default: allow }\n"
	tests := []struct {
		name, config string
		want         string
		at           string // ":LINE: " where the problem is, or ": "
	}{
		{"unknown key", "listen: { mcp: 127.0.0.1:0, amdin: 127.0.0.1:0 }\n" + principals,
			`unknown key "amdin" in listen`, ":1: "},
		{"bad type", listen + "limits:\n  max_request_bytes: [1]\n" + principals,
			"limits.max_request_bytes: want a size such as 64MiB", ":5: "},
		{"bad value", listen + "limits:\n  stdio_write_timeout: 1ms\n" + principals,
			"must be at least 100ms", ":5: "},
		{"no tokens", listen, "no agent tokens configured", ": "},
		{"unset token variable", listen + "agents:\n  - { id: a, token_env: CMD_TEST_UNSET_EXITCODE }\napprovers:\n  - { id: alice, token_env: CMD_TEST_APPROVER_TOKEN, roles: [admin] }\n",
			"CMD_TEST_UNSET_EXITCODE is not set", ":5: "},
		{"missing file", "", "no such file or directory", ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.config)
			if tt.config == "" {
				path = filepath.Join(filepath.Dir(path), "missing.yaml")
			}
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{"serve", "--config", path}, strings.NewReader(""), &stdout, &stderr)
			out := stderr.String()
			if code != 2 {
				t.Errorf("exit code %d, want 2\nstderr:\n%s", code, out)
			}
			if head := "toolgate: invalid config: " + path + tt.at; !strings.HasPrefix(out, head) || !strings.Contains(out, tt.want) {
				t.Errorf("stderr = %q, want it to start with %q and name %q", out, head, tt.want)
			}
			if strings.Contains(out, "usage") {
				t.Errorf("stderr calls a config problem a usage error: %q", out)
			}
			// Each problem names the file once, as path:line: when it can.
			for _, line := range strings.Split(out, "\n") {
				if n := strings.Count(line, path); n > 1 {
					t.Errorf("a line of stderr names the config file %d times: %q", n, line)
				}
			}
		})
	}
}

// TestServeHelp: "serve -h" names the command as it is typed and says
// what the exit codes are, like every other subcommand's help.
func TestServeHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"serve", "-h"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Errorf("serve -h exited %d, want 0", code)
	}
	out := stdout.String()
	for _, want := range []string{"Usage: toolgate serve --config FILE", "-ready-file", "Exit status: 0 "} {
		if !strings.Contains(out, want) {
			t.Errorf("serve -h:\n%s\nwant it to contain %q", out, want)
		}
	}
}

// TestPolicyHelpNamesCheckFlags: "toolgate policy help" lists check with
// the flags it takes, as "toolgate --help" does, and does not call it
// offline (it reads the token files and variables, the socket directory
// and the secrets serve would read, so it is run where serve runs).
func TestPolicyHelpNamesCheckFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	run(t.Context(), []string{"policy", "help"}, strings.NewReader(""), &stdout, &stderr)
	out := stdout.String() + stderr.String()
	for _, want := range []string{"check [--dev] [--stdio] [--insecure-no-auth] [--tools SERVER=FILE]... FILE", "where serve runs"} {
		if !strings.Contains(out, want) {
			t.Errorf("policy help:\n%s\nwant it to contain %q", out, want)
		}
	}
	if strings.Contains(out, "offline") {
		t.Errorf("policy help calls check offline:\n%s", out)
	}
}

// TestCheckTakesFlagsAfterTheFile: "policy check FILE --dev" checks as
// "policy check --dev FILE" does. A new user told "run with --dev" added
// it at the end of the command just run and got the usage text alone.
func TestCheckTakesFlagsAfterTheFile(t *testing.T) {
	path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\npolicy: { default: allow }\n")
	for _, args := range [][]string{{"--dev", path}, {path, "--dev"}} {
		var stdout, stderr bytes.Buffer
		if code := checkCmd(args, &stdout, &stderr, testSystem(nil)); code != 0 || !strings.Contains(stdout.String(), path+": ok") {
			t.Errorf("policy check %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := checkCmd([]string{path, path}, &stdout, &stderr, testSystem(nil)); code != 2 {
		t.Errorf("policy check with two files: exit %d, want 2", code)
	}
}

// TestCheckWarnsOfMissingUpstreamCommand: a stdio upstream whose command
// is not there passes the check (serve starts and keeps retrying it), but
// the check says so instead of "ok" alone; a command that is there does
// not warn.
func TestCheckWarnsOfMissingUpstreamCommand(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "present-server"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\nservers:\n"+
		"  ghost: { command: no-such-mcp-server }\n"+
		"  here: { command: present-server }\n"+
		"  abs: { command: "+filepath.Join(bin, "missing")+" }\n"+
		"  rel: { command: ./bin/missing-server }\n"+
		"  noexec: { command: "+filepath.Join(bin, "not-executable")+" }\n"+principals)
	if err := os.WriteFile(filepath.Join(bin, "not-executable"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := checkCmd([]string{path}, &stdout, &stderr, testSystem(map[string]string{"PATH": bin}))
	if code != 0 {
		t.Errorf("policy check exited %d, want 0 (a warning)\nstderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{
		`servers.ghost.command "no-such-mcp-server" is not in PATH (` + bin + `): serve starts without this upstream (its tools are missing) and keeps retrying it`,
		`servers.abs.command "` + filepath.Join(bin, "missing") + `" does not exist: serve starts without this upstream`,
		`servers.rel.command "./bin/missing-server" does not exist (a relative command is found from the working directory)`,
		`servers.noexec.command "` + filepath.Join(bin, "not-executable") + `" is not an executable file`,
	} {
		if !strings.Contains(stderr.String(), "warning: "+path+": "+want) {
			t.Errorf("stderr:\n%s\nwant a warning %q", stderr.String(), want)
		}
	}
	if strings.Contains(stderr.String(), "servers.here") {
		t.Errorf("a command that is in PATH is warned about:\n%s", stderr.String())
	}
}

// TestCheckCountsProblemsNotLines: a CEL error is printed with its source
// line and a caret under the fault; the total counts it once.
func TestCheckCountsProblemsNotLines(t *testing.T) {
	path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n"+principals+
		"policy:\n  rules:\n"+
		"    - { name: a, when: 'args.x <', effect: allow }\n"+
		"    - { name: b, when: 'arg.x == 1', effect: allow }\n")
	var stdout, stderr strings.Builder
	if code := checkCmd([]string{path}, &stdout, &stderr, testSystem(nil)); code != 2 {
		t.Errorf("policy check exited %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), path+": 2 problem(s)") || !strings.Contains(stderr.String(), "^") {
		t.Errorf("stderr:\n%s\nwant the carets and %q", stderr.String(), "2 problem(s)")
	}
}

// TestHelpGoesToStdout: help asked for (-h, --help, help) is printed to
// stdout with exit 0, for every command and subcommand alike, so that
// "toolgate serve -h | less" shows it; serve, policy check and audit
// verify printed theirs to stderr.
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"help"},
		{"serve", "-h"}, {"serve", "--help"},
		{"policy", "help"}, {"policy", "check", "-h"}, {"policy", "explain", "-h"}, {"policy", "test", "-h"}, {"policy", "show", "-h"},
		{"approvals", "-h"}, {"approvals", "list", "-h"}, {"approvals", "approve", "-h"},
		{"grants", "-h"},
		{"audit", "-h"}, {"audit", "verify", "-h"}, {"audit", "export", "-h"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
			if code != 0 || !strings.Contains(strings.ToLower(stdout.String()), "usage") || stderr.Len() > 0 {
				t.Errorf("toolgate %s: exit %d, want 0 with the help on stdout and nothing on stderr\nstdout:\n%s\nstderr:\n%s",
					strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
		})
	}
}

// TestMissingCommandSaysWhatToType: a command group given no command, or
// one it does not know, exits 2 naming every command it has ("toolgate
// policy" left out explain and test) and, for audit verify, the flag it
// needs.
func TestMissingCommandSaysWhatToType(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"policy"}, []string{"check", "explain", "test", "propose", "show", "diff", "apply"}},
		{[]string{"policy", "tset"}, []string{"check", "explain", "test", "propose", "show", "diff", "apply"}},
		{[]string{"audit"}, []string{"missing command: want verify or export"}},
		{[]string{"audit", "verify"}, []string{"audit verify needs --config FILE"}},
		{[]string{"audit", "verify", "--config= "}, []string{"audit verify needs --config FILE"}},
		{[]string{"serve", "--config= "}, []string{"Usage: toolgate serve --config FILE"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, strings.NewReader(""), &stdout, &stderr)
			first, _, _ := strings.Cut(stderr.String(), "\n")
			for _, w := range tt.want {
				if code != 2 || !strings.Contains(first, w) {
					t.Errorf("toolgate %s: exit %d, first line of stderr %q; want exit 2 naming %q", strings.Join(tt.args, " "), code, first, w)
				}
			}
		})
	}
}
