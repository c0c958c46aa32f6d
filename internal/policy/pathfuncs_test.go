package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// writeCall is a fs/write_file call with the JSON string path as its path.
func writeCall(path string) Call {
	arg, _ := json.Marshal(map[string]any{"path": path, "content": "x"})
	return Call{Server: "fs", Tool: "write_file", Arguments: arg, Principal: Principal{ID: "agent-1"}}
}

// TestPathWithin: path.within(p, dir) is true only for an absolute path
// with no ".." segment whose clean form is dir or below it; a relative,
// empty or NUL-holding path and any ".." segment are errors, never false,
// so that the condition fails closed in every rule position: an allow rule
// does not match (the call is held), and a deny or approve rule matches.
// startsWith, the condition the docs used to show, is wrong on the same
// table.
func TestPathWithin(t *testing.T) {
	const dir = "/tmp/work"
	cases := []struct {
		path   string
		within bool   // path.within(path, dir)
		err    string // substring of the error, "" for none
	}{
		{"/tmp/work/a.txt", true, ""},
		{"/tmp/work/sub/a.txt", true, ""},
		{"/tmp/work", true, ""},
		{"/tmp/work/", true, ""},
		{"/tmp//work///a", true, ""},
		{"/tmp/work/./a", true, ""},
		{"/tmp/./work/a", true, ""},
		{"/tmp/workbench/a", false, ""},
		{"/tmp/work-other", false, ""},
		{"/tmp", false, ""},
		{"/", false, ""},
		{"/etc/passwd", false, ""},
		{"/tmp/work/../x", false, "'..'"},
		{"/tmp/work/../../etc/cron.d/x", false, "'..'"},
		{"/tmp/work/a/../b", false, "'..'"},
		{"/tmp/work/..", false, "'..'"},
		{"/../tmp/work/a", false, "'..'"},
		{"tmp/work/a", false, "not absolute"},
		{"./tmp/work/a", false, "not absolute"},
		{"../work/a", false, "not absolute"},
		{"~/work/a", false, "not absolute"},
		{" /tmp/work/a", false, "not absolute"},
		{`C:\tmp\work\a`, false, "not absolute"},
		{"", false, "empty"},
		{"/tmp/work/a\x00/../../../etc", false, "NUL"},
		{"/tmp/work/a\x00", false, "NUL"},
	}
	e := mustCompile(t, newPolicy(Approve,
		Rule{Name: "within", Server: "fs", Tools: []string{"write_file"}, Effect: Allow, When: `path.within(args.path, "/tmp/work")`}))
	approve := mustCompile(t, newPolicy(Allow,
		Rule{Name: "outside", Server: "fs", Tools: []string{"write_file"}, Effect: Approve, When: `!path.within(args.path, "/tmp/work")`}))
	deny := mustCompile(t, newPolicy(Allow,
		Rule{Name: "inside", Server: "fs", Tools: []string{"write_file"}, Effect: Deny, When: `path.within(args.path, "/tmp/work")`}))
	naive := mustCompile(t, newPolicy(Approve,
		Rule{Name: "prefix", Server: "fs", Tools: []string{"write_file"}, Effect: Allow, When: `args.path.startsWith("/tmp/work/")`}))
	naiveWrong := 0
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			got, err := pathWithin(c.path, dir)
			if got != c.within || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("pathWithin(%q, %q) = %v, %v; want %v and an error holding %q", c.path, dir, got, err, c.within, c.err)
			}
			if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(c.path, "/")) && c.path != "" {
				t.Errorf("the error %q quotes the path", err)
			}
			// As an allow rule: allowed only when within; else the default holds it.
			want := Approve
			if c.within {
				want = Allow
			}
			if d := eval(t, e, writeCall(c.path)); d.Effect != want || (len(d.Errors) > 0) != (c.err != "") {
				t.Errorf("allow when within: %s by %q (errors %v), want %s", d.Effect, d.Rule, d.Errors, want)
			}
			// As an approve rule on the negation: held unless within.
			want = Approve
			if c.within {
				want = Allow
			}
			if d := eval(t, approve, writeCall(c.path)); d.Effect != want {
				t.Errorf("approve unless within: %s by %q (errors %v), want %s", d.Effect, d.Rule, d.Errors, want)
			}
			// As a deny rule: an error denies too (the path cannot be read).
			want = Allow
			if c.within || c.err != "" {
				want = Deny
			}
			if d := eval(t, deny, writeCall(c.path)); d.Effect != want {
				t.Errorf("deny when within: %s by %q (errors %v), want %s", d.Effect, d.Rule, d.Errors, want)
			}
			if d := eval(t, naive, writeCall(c.path)); (d.Effect == Allow) != c.within {
				naiveWrong++
			}
		})
	}
	if naiveWrong == 0 {
		t.Errorf("startsWith decided every case like path.within: the table does not show the difference")
	}
}

// TestPathClean: path.clean(p) is the lexical clean form of an absolute
// path without ".." segments, and an error (strict reading) for anything
// else; a deny rule on exact files holds for spellings of them.
func TestPathClean(t *testing.T) {
	for in, want := range map[string]string{
		"/etc/passwd": "/etc/passwd", "//etc/./passwd": "/etc/passwd", "/etc/": "/etc", "/": "/", "///": "/",
	} {
		if got, err := pathClean(in); got != want || err != nil {
			t.Errorf("pathClean(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "etc/passwd", "/etc/../etc/passwd", "/etc/passwd\x00", ".."} {
		if got, err := pathClean(in); err == nil {
			t.Errorf("pathClean(%q) = %q, want an error", in, got)
		}
	}
	e := mustCompile(t, newPolicy(Allow,
		Rule{Name: "secrets", Server: "fs", Effect: Deny, When: `path.clean(args.path) in ["/etc/shadow", "/etc/passwd"]`}))
	for path, want := range map[string]Effect{
		"/etc/passwd": Deny, "/etc//passwd": Deny, "/etc/./shadow": Deny, "/tmp/../etc/passwd": Deny,
		"etc/passwd": Deny, "/etc/hosts": Allow,
	} {
		if d := eval(t, e, writeCall(path)); d.Effect != want {
			t.Errorf("%q: %s (errors %v), want %s", path, d.Effect, d.Errors, want)
		}
	}
}

// TestPathFunctionsLoad: the path functions type-check with a string and
// a dyn argument, refuse other types at load, refuse a literal directory
// that can never hold (relative, with "..", empty), and a non-string
// argument at run time is an error (strict reading).
func TestPathFunctionsLoad(t *testing.T) {
	for _, ok := range []string{
		`path.within(args.path, "/tmp/work")`,
		`path.within(args.path, "/")`,
		`path.within(args.path, args.root)`,
		`args.paths.all(p, path.within(p, "/tmp/work"))`,
		`path.clean(args.path) == "/etc/passwd"`,
		`path.within(path.clean(args.path), "/srv")`,
	} {
		p := newPolicy(Approve, Rule{Name: "r", Server: "fs", Effect: Allow, When: ok})
		if errs := p.Validate(); errs != nil {
			t.Errorf("%s: %v", ok, errs)
		}
	}
	for src, want := range map[string]string{
		`path.within(args.path, 1)`:             "no matching overload",
		`path.within(args.path)`:                "no matching overload",
		`path.clean(1) == "/"`:                  "no matching overload",
		`path.within(args.path, "tmp/work")`:    "not absolute",
		`path.within(args.path, "/tmp/../etc")`: "'..'",
		`path.within(args.path, "")`:            "empty",
		`path.within("x", "/a\u0000")`:          "NUL",
		`path.clean(args.path)`:                 "bool",
	} {
		p := newPolicy(Approve, Rule{Name: "r", Server: "fs", Effect: Allow, When: src})
		errs := p.Validate()
		if len(errs) == 0 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%s: errors %v, want one holding %q", src, errs, want)
		}
	}
	e := mustCompile(t, newPolicy(Approve,
		Rule{Name: "r", Server: "fs", Effect: Allow, When: `args.paths.all(p, path.within(p, "/tmp/work"))`}))
	for args, want := range map[string]Effect{
		`{"paths":["/tmp/work/a","/tmp/work/b"]}`:        Allow,
		`{"paths":["/tmp/work/a","/tmp/work/../etc/x"]}`: Approve,
		`{"paths":["/tmp/work/a",5]}`:                    Approve,
		`{"paths":"/tmp/work/a"}`:                        Approve,
	} {
		c := writeCall("")
		c.Arguments = json.RawMessage(args)
		if d := eval(t, e, c); d.Effect != want {
			t.Errorf("%s: %s (errors %v), want %s", args, d.Effect, d.Errors, want)
		}
	}
}

// TestPathWithinDirs: the directory is cleaned like the path; "/" holds
// every absolute path.
func TestPathWithinDirs(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/x", "/", true}, {"/", "/", true}, {"/tmp/work/a", "/tmp/work/", true}, {"/tmp/work", "//tmp/./work", true},
		{"/tmp/work2", "/tmp/work/", false}, {"/tmp", "/tmp/work", false}, {"/tmp/wor", "/tmp/work", false},
	} {
		if got, err := pathWithin(c.p, c.dir); got != c.want || err != nil {
			t.Errorf("pathWithin(%q, %q) = %v, %v; want %v", c.p, c.dir, got, err, c.want)
		}
	}
}

// TestPathDocExample: the rules of docs/policy.md "Paths" load and decide
// as the page says.
func TestPathDocExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "### Paths: `path.within` and `path.clean`")
	m := yamlBlockRE.FindStringSubmatch(sec)
	if !ok || m == nil {
		t.Fatal("docs/policy.md has no Paths section with a yaml block")
	}
	p := newPolicy(Approve)
	if err := yaml.Unmarshal([]byte(m[1]), p); err != nil {
		t.Fatal(err)
	}
	e := mustCompile(t, p)
	if s := p.Shadowed(); len(s) > 0 {
		t.Errorf("Shadowed() = %v", s)
	}
	call := func(tool, args string) Call {
		return Call{Server: "fs", Tool: tool, Arguments: json.RawMessage(args), Principal: Principal{ID: "agent-1"}}
	}
	for _, c := range []struct {
		c    Call
		want Effect
	}{
		{call("write_file", `{"path":"/tmp/work/a.txt"}`), Allow},
		{call("write_file", `{"path":"/tmp/work/../etc/cron.d/x"}`), Deny}, // "no secrets" errs: a deny
		{call("write_file", `{"path":"/tmp/workbench/a"}`), Approve},
		{call("edit_file", `{"path":"work/a"}`), Deny},
		{call("move_file", `{"source":"/tmp/work/a","destination":"/tmp/work/b"}`), Allow},
		{call("move_file", `{"source":"/tmp/work/a","destination":"/srv/b"}`), Approve},
		{call("read_text_file", `{"path":"/etc//shadow"}`), Deny},
		{call("read_text_file", `{"path":"/tmp/../etc/sudoers"}`), Deny},
		{call("read_text_file", `{"path":"/etc/hosts"}`), Approve},
		{call("list_allowed_directories", `{}`), Approve},
	} {
		if d := eval(t, e, c.c); d.Effect != c.want {
			t.Errorf("%s %s: %s by %q (errors %v), want %s", c.c.Tool, c.c.Arguments, d.Effect, d.Rule, d.Errors, c.want)
		}
	}
}

// TestPathWithinGrant: a grant's predicate has the path functions too;
// an erroring path never matches the grant (the call stays held), and a
// literal directory that cannot hold is refused like in a rule.
func TestPathWithinGrant(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve))
	g := grantFor("g1", `path.within(args.path, "/srv/repo/docs")`)
	g.Server, g.Tool = "fs", "write_file"
	for path, want := range map[string]Effect{
		"/srv/repo/docs/a.md": Allow, "/srv/repo/docs/../src/main.go": Approve, "docs/a.md": Approve, "/srv/repo/docsx": Approve,
	} {
		c := writeCall(path)
		c.Grants, c.Now = []Grant{g}, propNow
		if d := eval(t, e, c); d.Effect != want {
			t.Errorf("%q: %s by grant %q (errors %v), want %s", path, d.Effect, d.Grant, d.Errors, want)
		}
	}
	if err := CheckGrantPredicate(`path.within(args.path, "docs")`); err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("CheckGrantPredicate with a relative directory = %v", err)
	}
}

// refSegments is the reference model of pathClean: the names of an
// absolute path without ".." and NUL, or ok false.
func refSegments(p string) (segs []string, ok bool) {
	if p == "" || p[0] != '/' || strings.ContainsRune(p, 0) {
		return nil, false
	}
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "..":
			return nil, false
		case "", ".":
		default:
			segs = append(segs, s)
		}
	}
	return segs, true
}

// FuzzPathWithin checks pathWithin and pathClean against a model that
// compares segment lists (no prefix arithmetic on strings).
func FuzzPathWithin(f *testing.F) {
	for _, s := range [][2]string{
		{"/tmp/work/a", "/tmp/work"}, {"/tmp/workbench", "/tmp/work"}, {"/tmp/work/../x", "/tmp/work"},
		{"/", "/"}, {"//a//b/", "/a/"}, {"/a/./b", "/a/b"}, {"a/b", "/a"}, {"/a\x00", "/"}, {"/a/..b", "/a"},
		{"/a/b..", "/a"}, {"/...", "/"}, {"", "/"}, {"/a", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, dir string) {
		ps, okP := refSegments(p)
		ds, okD := refSegments(dir)
		got, err := pathWithin(p, dir)
		if (err == nil) != (okP && okD) {
			t.Fatalf("pathWithin(%q, %q) error %v; model: path ok %v, dir ok %v", p, dir, err, okP, okD)
		}
		want := okP && okD && len(ps) >= len(ds) && slices.Equal(ps[:len(ds)], ds)
		if got != want {
			t.Fatalf("pathWithin(%q, %q) = %v, model %v", p, dir, got, want)
		}
		c, err := pathClean(p)
		if (err == nil) != okP || (okP && c != "/"+strings.Join(ps, "/")) {
			t.Fatalf("pathClean(%q) = %q, %v; model %v %q", p, c, err, okP, "/"+strings.Join(ps, "/"))
		}
	})
}

// TestPathPrefixes: a startsWith with a literal that looks like an
// absolute path is reported, with the rule; other prefixes, a bare "/"
// (an absoluteness test) and path.within are not.
func TestPathPrefixes(t *testing.T) {
	p := newPolicy(Approve,
		Rule{Name: "scratch", Server: "fs", Effect: Allow, When: `args.path.startsWith("/tmp/work/")`},
		Rule{Name: "new", Server: "pay", Effect: Approve, When: `args.to.startsWith("new-")`},
		Rule{Name: "within", Server: "fs", Effect: Allow, When: `path.within(args.path, "/tmp/work")`},
		Rule{Name: "both", Server: "fs", Effect: Deny, When: `has(args.p) && (args.p.startsWith("/etc") || args.q.startsWith("/"))`},
	)
	mustCompile(t, p)
	var got []string
	for _, err := range p.PathPrefixes() {
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Key != "when" {
			t.Fatalf("%v: not a FieldError of when", err)
		}
		got = append(got, fmt.Sprint(fe.Rule, " ", err))
	}
	want := []string{
		`0 rules[0] "scratch": when tests the string prefix "/tmp/work/", which also holds for "/tmp/work/../elsewhere" (a server resolves the '..' out of the directory); for a path, write path.within(ARG, "/tmp/work") (docs/policy.md "Paths")`,
		`3 rules[3] "both": when tests the string prefix "/etc", which also holds for "/etc/../elsewhere" (a server resolves the '..' out of the directory); for a path, write path.within(ARG, "/etc") (docs/policy.md "Paths")`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("PathPrefixes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
