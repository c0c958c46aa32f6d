package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckToolsWarnsAboutArgTypos: with --tools SERVER=FILE (the server's
// tools/list), policy check warns about a when condition reading a field
// the tool's input schema lacks, with the file's line, and still exits 0;
// a correct field, and no --tools, warn nothing. A --tools flag naming a
// server that is not configured, or a file that is not a tools list, is a
// usage error (exit 2).
func TestCheckToolsWarnsAboutArgTypos(t *testing.T) {
	path := payPolicyConfig(t, `    - name: big
      server: pay
      tools: [transfer]
      when: args.ammount > 1000
      effect: approve
    - name: fine
      server: pay
      tools: [transfer]
      when: args.amount > 10 && has(args.to)
      effect: approve
`)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	schema := `[{"name":"transfer","inputSchema":{"type":"object","properties":{"amount":{"type":"number"},"to":{"type":"string"}}}}]`
	files := map[string]string{
		"result":   write("result.json", `{"tools":`+schema+`}`),
		"response": write("response.json", `{"jsonrpc":"2.0","id":1,"result":{"tools":`+schema+`}}`),
		"array":    write("array.json", schema),
	}
	want := `warning: ` + path + `:16: policy.rules[0] "big": when reads args.ammount, but the input schema of pay/transfer does not declare it (it declares: amount, to)`
	for form, file := range files {
		var stdout, stderr strings.Builder
		code := checkCmd([]string{path, "--tools", "pay=" + file}, &stdout, &stderr, testSystem(nil))
		if code != 0 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), `"fine"`) {
			t.Errorf("%s: policy check exited %d\nstderr:\n%s\nwant exit 0 and\n%s", form, code, stderr.String(), want)
		}
	}

	var stderr strings.Builder
	if code := checkCmd([]string{path}, &strings.Builder{}, &stderr, testSystem(nil)); code != 0 || strings.Contains(stderr.String(), "ammount") {
		t.Errorf("without --tools: exit %d\n%s", code, stderr.String())
	}
	for _, bad := range [][]string{
		{"--tools", "fs=" + files["result"]},
		{"--tools", "pay=" + write("bad.json", `{"nope": 1}`)},
		{"--tools", "pay"},
	} {
		stderr.Reset()
		if code := checkCmd(append([]string{path}, bad...), &strings.Builder{}, &stderr, testSystem(nil)); code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", bad, code, stderr.String())
		}
	}
}

// TestCheckToolsOnlyWhereTheSchemaSays is polish19's item 5: --tools
// warned about any field missing from the input schema's top-level
// properties, also where the schema declares fields elsewhere ($ref,
// allOf, anyOf…) or admits others explicitly, where the field may well be
// the tool's. It warns only when the schema says what its fields are: a
// plain object schema that lists properties (or forbids all others).
func TestCheckToolsOnlyWhereTheSchemaSays(t *testing.T) {
	path := payPolicyConfig(t, `    - name: big
      server: pay
      tools: [transfer]
      when: args.amount > 1000
      effect: approve
`)
	amountElsewhere := map[string]string{
		"$ref":                      `{"$ref":"#/$defs/t","$defs":{"t":{"type":"object","properties":{"amount":{"type":"number"}}}}}`,
		"allOf":                     `{"type":"object","properties":{"to":{}},"allOf":[{"properties":{"amount":{"type":"number"}}}]}`,
		"anyOf":                     `{"anyOf":[{"type":"object","properties":{"amount":{}}},{"type":"object","properties":{"to":{}}}]}`,
		"oneOf":                     `{"type":"object","oneOf":[{"properties":{"amount":{}}}]}`,
		"if/then":                   `{"type":"object","properties":{"to":{}},"if":{"required":["to"]},"then":{"properties":{"amount":{}}}}`,
		"patternProperties":         `{"type":"object","properties":{"to":{}},"patternProperties":{"^am":{}}}`,
		"additionalProperties true": `{"type":"object","properties":{"to":{}},"additionalProperties":true}`,
		"additionalProperties {}":   `{"type":"object","properties":{"to":{}},"additionalProperties":{"type":"number"}}`,
		"no properties":             `{"type":"object"}`,
	}
	closed := map[string]string{
		"properties":                 `{"type":"object","properties":{"to":{}}}`,
		"additionalProperties false": `{"type":"object","properties":{"to":{}},"additionalProperties":false}`,
		"nothing allowed":            `{"type":"object","additionalProperties":false}`,
	}
	dir := t.TempDir()
	check := func(name, schema string) string {
		t.Helper()
		file := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_", "$", "").Replace(name)+".json")
		if err := os.WriteFile(file, []byte(`[{"name":"transfer","inputSchema":`+schema+`}]`), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		if code := checkCmd([]string{path, "--tools", "pay=" + file}, &strings.Builder{}, &stderr, testSystem(nil)); code != 0 {
			t.Fatalf("%s: exit %d\n%s", name, code, stderr.String())
		}
		return stderr.String()
	}
	for name, schema := range amountElsewhere {
		if out := check(name, schema); strings.Contains(out, "args.amount") {
			t.Errorf("%s: the schema may declare amount, but check warns:\n%s", name, out)
		}
	}
	for name, schema := range closed {
		if out := check(name, schema); !strings.Contains(out, "when reads args.amount, but the input schema of pay/transfer does not declare it") {
			t.Errorf("%s: the schema does not declare amount, but check does not warn:\n%s", name, out)
		}
	}
}

// payPolicyConfig writes a config with the HTTP server pay and a policy
// (default allow) of rules, the YAML of its rules list, and returns its
// path.
func payPolicyConfig(t *testing.T, rules string) string {
	t.Helper()
	return writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\n"+principals+`servers:
  pay: { url: "http://127.0.0.1:9/mcp" }
policy:
  default: allow
  rules:
`+rules)
}

// TestCheckToolsWarnsAboutACommandArgumentTypo (newuser46): a command
// selector whose argument the tool's input schema does not declare reads
// nothing from any call: a deny rule then denies every call of the tool,
// an allow rule never allows. With --tools, policy check says so, at the
// key's line; the argument the schema declares draws nothing.
func TestCheckToolsWarnsAboutACommandArgumentTypo(t *testing.T) {
	path := payPolicyConfig(t, `    - name: no rm
      server: pay
      tools: [run]
      command: { argument: cmd, match: ["rm *"] }
      effect: deny
    - name: git reads
      server: pay
      tools: [run]
      command: { argument: command, match: ["git status"] }
      effect: allow
`)
	file := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(file, []byte(`{"tools":[{"name":"run","inputSchema":{"type":"object","properties":{"command":{"type":"string"}}}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	code := checkCmd([]string{path, "--tools", "pay=" + file}, &strings.Builder{}, &stderr, testSystem(nil))
	want := `warning: ` + path + `:16: policy.rules[0] "no rm": command.argument is "cmd", but the input schema of pay/run does not declare it (it declares: command); so the command is missing from every call, which counts as a match: this deny rule decides every call of those tools`
	if code != 0 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), `"git reads"`) {
		t.Errorf("policy check exited %d\nstderr:\n%s\nwant exit 0 and\n%s", code, stderr.String(), want)
	}
}
