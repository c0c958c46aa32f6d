package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShapeErrorsNameTheKeyAndTheFix: a value of the wrong shape (a single
// value where a list is wanted, a list where a mapping is, a word where a
// number or true/false is) is one problem naming its line, its key and what
// to write, not go-yaml's "cannot unmarshal !!str `x` into []string"; what
// go-yaml accepts (yes/no for a bool, 2.0 for a count, an empty value) stays
// accepted.
func TestShapeErrorsNameTheKeyAndTheFix(t *testing.T) {
	const base = "servers:\n  fs:\n    command: fs-server\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"string for a list", base + "policy:\n  rules:\n    - name: r\n      tools: move_file\n      effect: deny\n",
			`line 7: policy.rules[0].tools: "move_file" is a single value; want a list: write [move_file]`},
		{"mapping for a list", base + "    args: {a: 1}\n",
			`line 4: servers.fs.args: want a list ([a, b], or one "- item" per line), not a mapping of keys to values`},
		{"list for a mapping", "servers:\n  - fs:\n      command: x\n",
			`line 2: servers: want a mapping of keys to values, not a list`},
		{"list for a map value", "servers:\n  fs: [x]\n",
			`line 2: servers.fs: want a mapping of keys to values, not a list`},
		{"scalar for a struct", "policy:\n  approval: 5m\n",
			`line 2: policy.approval: "5m" is a single value; want a mapping of keys to values`},
		{"list for a string", base + "policy:\n  rules:\n    - name: r\n      tools: [x]\n      effect: [deny]\n",
			`line 8: policy.rules[0].effect: want a single value, not a list`},
		{"word for a bool", base + "    tool_prefix: yes please\n",
			`line 4: servers.fs.tool_prefix: "yes please" is not true or false`},
		{"word for a count", "approvals:\n  max_pending: lots\n",
			`line 2: approvals.max_pending: "lots" is not a whole number`},
		{"quoted bool", base + "    tool_prefix: \"true\"\n",
			`line 4: servers.fs.tool_prefix: "true" is not true or false (it is quoted, which makes it text: write it without quotes)`},
		{"quoted count", "approvals:\n  max_pending: '5'\n",
			`line 2: approvals.max_pending: "5" is not a whole number (it is quoted, which makes it text: write it without quotes)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tc.yaml), nil)
			if err == nil {
				t.Fatalf("Load accepted:\n%s", tc.yaml)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "cannot unmarshal") {
				t.Errorf("error still has go-yaml's text:\n%v", err)
			}
		})
	}
	for _, ok := range []string{
		base + "    tool_prefix: no\n",
		base + "    tool_prefix: false\n",
		"approvals:\n  max_pending: 2.0\n",
		"approvals:\n",
		base + "    args:\n",
	} {
		if _, err := parse(strings.NewReader(ok), nil); err != nil {
			t.Errorf("parse refused what go-yaml accepts:\n%s\nerror: %v", ok, err)
		}
	}
}

// TestSyntaxErrorsSayWhatToLookFor: go-yaml names the first line of a
// block with a badly indented line in it ("did not find expected key"),
// and says "found character that cannot start any token" for a tab; both
// now say what to look for.
func TestSyntaxErrorsSayWhatToLookFor(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"under-indented key", "servers:\n  fs:\n    command: x\n   args: [a]\n",
			"line 1: did not find expected key (in the block that starts on line 1 a line is indented more or less than the keys beside it"},
		{"over-indented key", "servers:\n  fs:\n    command: x\n      args: [a]\n",
			"line 4: mapping values are not allowed in this context (a \"key:\" indented under a value: indent it like the keys beside it"},
		{"tab", "servers:\n  fs:\n\tcommand: x\n", "line 3: found character that cannot start any token (a tab: YAML indents with spaces only)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tc.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestWarnsOfAnAdminListenerOffLoopback: an admin listener any other host
// can reach, with no https public_url to say a TLS proxy is in front, is
// warned about (tokens and cookies in clear text); loopback, a Unix socket,
// none, or an https public_url are not.
func TestWarnsOfAnAdminListenerOffLoopback(t *testing.T) {
	const want = "without TLS: approver tokens and inbox cookies cross the network in clear text"
	for _, tc := range []struct {
		admin, publicURL string
		warns            bool
	}{
		{"0.0.0.0:7071", "", true},
		{":7071", "", true},
		{"10.1.2.3:7071", "http://10.1.2.3:7071", true},
		{"toolgate.internal:7071", "", true},
		{"0.0.0.0:7071", "https://toolgate.example.com", false},
		{"0.0.0.0:7071", "HTTPS://toolgate.example.com", false},
		{"127.0.0.1:7071", "", false},
		{"[::1]:7071", "", false},
		{"localhost:7071", "", false},
		{"unix:///run/toolgate/admin.sock", "", false},
		{"", "", false},
	} {
		c := Default()
		c.Listen.Admin, c.Approvals.PublicURL = tc.admin, tc.publicURL
		got := strings.Join(c.Warnings(), "\n")
		if strings.Contains(got, want) != tc.warns {
			t.Errorf("listen.admin %q, public_url %q: warnings:\n%s\nwant a warning about it: %v", tc.admin, tc.publicURL, got, tc.warns)
		}
	}
}

// TestUnsetVariableReportedOnce: a key whose ${VAR} is unset is reported
// once, as unset, not a second time as empty ("storage.dsn: required for
// driver postgres"); a problem on another line still is.
func TestUnsetVariableReportedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	if err := os.WriteFile(path, []byte("storage:\n  driver: postgres\n  dsn: ${DATABASE_URL}\nlisten:\n  admin: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, problems, _ := Check(path, nil)
	got := strings.Join(problems, "\n")
	if !strings.Contains(got, path+":3: ${DATABASE_URL} is not set") {
		t.Errorf("problems:\n%s\nwant the unset variable on line 3", got)
	}
	if strings.Contains(got, "required for driver postgres") {
		t.Errorf("problems:\n%s\nreport the empty dsn a second time", got)
	}
	if !strings.Contains(got, path+`:5: listen.admin "nope"`) {
		t.Errorf("problems:\n%s\nwant listen.admin's problem still", got)
	}
}

// TestShapeErrorsKeepSecretsOut: a value of the wrong shape where secrets
// live (an upstream's args, env and headers, storage) or one a ${VAR} gave
// is not echoed whole into the problem (stderr, serve's log): at most its
// first 7 characters, as go-yaml's "cannot unmarshal" said on e3d84af.
func TestShapeErrorsKeepSecretsOut(t *testing.T) {
	const secret = "sk-live-S3CRETVALUE"
	env := MapEnv(map[string]string{
		"AUTH":         "Authorization: Bearer " + secret,
		"DATABASE_URL": "postgres://toolgate:" + secret + "@db:5432/toolgate",
	})
	yml := "servers:\n  fs:\n    command: /bin/cat\n    args: --api-key=" + secret + "\n    env: API_KEY=" + secret + "\n" +
		"  web:\n    url: https://example.com/mcp\n    headers: ${AUTH}\nstorage: ${DATABASE_URL}\n"
	_, err := Load(strings.NewReader(yml), env)
	if err == nil {
		t.Fatalf("Load accepted:\n%s", yml)
	}
	for _, key := range []string{"servers.fs.args", "servers.fs.env", "servers.web.headers", "storage"} {
		if !strings.Contains(err.Error(), key+": ") {
			t.Errorf("error:\n%v\nwant a problem naming %s", err, key)
		}
	}
	if strings.Contains(err.Error(), "S3CRET") {
		t.Errorf("error echoes a secret:\n%v", err)
	}
}

// TestUnsetVariableHidesNoOtherKey (attack36): the once-only report of an
// unset ${VAR} leaves out the problems of its own key, not every problem
// on its line: in a file written on one line (JSON, a flow mapping) the
// other keys' problems are still reported.
func TestUnsetVariableHidesNoOtherKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	if err := os.WriteFile(path, []byte(`{"listen": {"admin": "nope"}, "storage": {"driver": "postgres", "dsn": "${DATABASE_URL}"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, problems, _ := Check(path, nil)
	got := strings.Join(problems, "\n")
	if !strings.Contains(got, path+":1: ${DATABASE_URL} is not set") {
		t.Errorf("problems:\n%s\nwant the unset variable on line 1", got)
	}
	if !strings.Contains(got, path+`:1: listen.admin "nope"`) {
		t.Errorf("problems:\n%s\nwant listen.admin's problem on the same line still", got)
	}
}
