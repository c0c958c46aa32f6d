package policy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// yamlBlockRE finds the yaml code blocks of a Markdown file.
var yamlBlockRE = regexp.MustCompile("(?s)```ya?ml\n(.*?)```")

// TestShadowedRepoPolicies: no policy in the repo's examples and docs has
// a rule Shadowed reports, an exact call OverruledExactCalls reports
// (newuser46) or a condition PathPrefixes reports (each would
// be a false warning of policy check, or a documented policy with a dead
// rule or a path tested by prefix). A block that is not a whole
// policy document (a fragment) is skipped; enough of them must be read.
func TestShadowedRepoPolicies(t *testing.T) {
	var docs []string
	for _, glob := range []string{"../../examples/*.yaml", "../../docs/*.md", "../../README.md", "../config/testdata/*.yaml"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(f, ".yaml") {
				docs = append(docs, f+"\x00"+string(b))
				continue
			}
			for k, m := range yamlBlockRE.FindAllStringSubmatch(string(b), -1) {
				docs = append(docs, f+"#"+string(rune('0'+k%10))+"\x00"+m[1])
			}
		}
	}
	read := 0
	for _, d := range docs {
		name, text, _ := strings.Cut(d, "\x00")
		var top struct {
			Policy *Policy `yaml:"policy"`
		}
		if err := yaml.Unmarshal([]byte(text), &top); err != nil || top.Policy == nil || len(top.Policy.Rules) < 2 {
			if err != nil && strings.Contains(text, "rules:") {
				t.Logf("%s: skipped: %v", name, err)
			}
			continue
		}
		p := top.Policy
		if p.Default == "" {
			p.Default = Approve // the config's default
		}
		if _, err := Compile(p); err != nil {
			t.Logf("%s: skipped: %v", name, err)
			continue
		}
		read++
		for _, s := range p.Shadowed() {
			t.Errorf("%s: %s never decides a call: %s covers it", name, ruleLabel(p, s.Rule), ruleLabel(p, s.By))
		}
		for _, err := range p.PathPrefixes() {
			t.Errorf("%s: %v", name, err)
		}
		for _, o := range p.OverruledExactCalls(func(id string) Principal { return Principal{ID: id} }) {
			t.Errorf("%s: %s never allows the one call its when names: %s matches it too", name, ruleLabel(p, o.Rule), ruleLabel(p, o.By))
		}
	}
	if read < 3 {
		t.Errorf("read %d policies with two rules or more from examples and docs, want at least 3", read)
	}
	t.Logf("%d policies read", read)
}
