// Package doclinks holds a test that every relative link of README.md and
// docs/*.md resolves: its file exists and its #anchor is a heading there.
package doclinks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const repoRoot = "../.."

var (
	// link is a Markdown link or image target: ](target) or ](target "title").
	link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// code is an inline code span, whose text is no link.
	code = regexp.MustCompile("`[^`]*`")
	// notAnchor is what GitHub drops from a heading's text to make its
	// anchor: everything but letters, marks, digits, '_', '-' and spaces.
	notAnchor = regexp.MustCompile(`[^\p{L}\p{M}\p{N}_\- ]`)
)

// anchors returns the anchors GitHub gives the headings of a Markdown text
// outside code fences (a repeated one gets -1, -2, …).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		a := strings.ReplaceAll(notAnchor.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// targets returns the link targets of a Markdown text outside code fences
// and inline code, each with its 1-based line number.
func targets(text string) (ts []string, lines []int) {
	fence := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(l, ""), -1) {
			ts = append(ts, m[1])
			lines = append(lines, i+1)
		}
	}
	return ts, lines
}

// problems checks every relative link of file (a path under root) and
// returns what does not resolve.
func problems(root, file string, read func(string) (string, error)) ([]string, error) {
	text, err := read(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	var out []string
	ts, lines := targets(text)
	for i, t := range ts {
		if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
			continue
		}
		path, frag, _ := strings.Cut(t, "#")
		target := file
		if path != "" {
			target = filepath.Join(filepath.Dir(file), path)
		}
		where := fmt.Sprintf("%s:%d: %s", file, lines[i], t)
		if _, err := os.Stat(filepath.Join(root, target)); err != nil {
			out = append(out, where+": no such file "+target)
			continue
		}
		if frag == "" || !strings.HasSuffix(target, ".md") {
			continue
		}
		body, err := read(filepath.Join(root, target))
		if err != nil {
			return nil, err
		}
		if !anchors(body)[frag] {
			out = append(out, where+": no heading with anchor #"+frag+" in "+target)
		}
	}
	return out, nil
}

func readString(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return string(b), nil
}

// TestRepositoryLinksResolve: every relative link and #anchor of README.md
// and docs/*.md names a file that exists and a heading it has.
func TestRepositoryLinksResolve(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	rel := []string{"README.md"}
	for _, f := range files {
		r, err := filepath.Rel(repoRoot, f)
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, r)
	}
	if len(rel) < 3 {
		t.Fatalf("found only %q: wrong root?", rel)
	}
	for _, f := range rel {
		ps, err := problems(repoRoot, f, readString)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			t.Error(p)
		}
	}
}

// TestBrokenLinksAreFound: the check reports a missing file and a missing
// anchor, and passes links into code, fences and real headings.
func TestBrokenLinksAreFound(t *testing.T) {
	root := t.TempDir()
	docs := filepath.Join(root, "docs")
	if err := os.Mkdir(docs, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A doc\n\n## What 0 means\n\n## Twice\n\n## Twice\n\n```\n## Not a heading\n```\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/a.md#what-0-means) [ok2](docs/a.md#twice-1) [self](#top) [web](https://example.com/x#y)",
		"[gone](docs/b.md) [bad anchor](docs/a.md#not-a-heading) [self bad](#nowhere)",
		"`[in code](docs/none.md)`",
		"```",
		"[in fence](docs/none.md)",
		"```",
		"![pic](docs/a.md \"title\")",
	}, "\n"))
	ps, err := problems(root, "README.md", readString)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:3: docs/b.md: no such file docs/b.md",
		"README.md:3: docs/a.md#not-a-heading: no heading with anchor #not-a-heading in docs/a.md",
		"README.md:3: #nowhere: no heading with anchor #nowhere in README.md",
	}
	if strings.Join(ps, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems\n%s\nwant\n%s", strings.Join(ps, "\n"), strings.Join(want, "\n"))
	}
}
