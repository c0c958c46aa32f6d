package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const oldDoc = "# Performance\n\nintro\n\n## A\n\na1\n```sh\n# not a heading\n```\n\n### B (2026-12-02, branch `bee`)\n\nb1\nb2\n"

func newDocs(current string, history ...string) []doc {
	docs := []doc{{path: currentDoc, lines: lines(current)}}
	for i, h := range history {
		docs = append(docs, doc{path: historyDir + "/history-" + string(rune('a'+i)) + ".md", lines: lines(h)})
	}
	return docs
}

func TestSplitSectionsSkipsFencedHashes(t *testing.T) {
	got := splitSections(lines(oldDoc))
	var heads []string
	for _, s := range got {
		heads = append(heads, s.lines[0])
	}
	want := []string{"# Performance", "## A", "### B (2026-12-02, branch `bee`)"}
	if strings.Join(heads, "|") != strings.Join(want, "|") {
		t.Fatalf("sections start with %q, want %q", heads, want)
	}
}

func TestCheckSections(t *testing.T) {
	index := "# History\n\n- [A](#a)\n\n<!-- verbatim -->\n\n"
	for _, tc := range []struct {
		name    string
		docs    []doc
		problem string // "" for none
	}{
		{"moved verbatim into two files", newDocs("# New\n", index+"# Performance\n\nintro\n\n## A\n\na1\n```sh\n# not a heading\n```\n\n", "### B (2026-12-02, branch `bee`)\n\nb1\nb2\n"), ""},
		{"one line lost", newDocs("# New\n", index+"# Performance\n\nintro\n\n## A\n\na1\n```sh\n# not a heading\n```\n\n", "### B (2026-12-02, branch `bee`)\n\nb2\n"), "not found verbatim"},
		{"one line edited", newDocs("# New\n", strings.Replace(oldDoc, "a1", "a one", 1)), "not found verbatim"},
		{"out of order", newDocs("# New\n", "### B (2026-12-02, branch `bee`)\n\nb1\nb2\n", "# Performance\n\nintro\n\n## A\n\na1\n```sh\n# not a heading\n```\n\n"), "out of the old file's order"},
		{"kept in the current document", newDocs(oldDoc), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(checkSections(oldDoc, tc.docs), "\n")
			if tc.problem == "" && got != "" || !strings.Contains(got, tc.problem) {
				t.Fatalf("problems %q, want one containing %q", got, tc.problem)
			}
		})
	}
}

func TestCheckCitations(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("internal/x/x.go", "package x\n\n// Measured (docs/performance.md, \"Held calls at\n// scale\", step 3; docs/performance.md, branch `bee`).\n")
	write("docs/y.md", "See docs/performance/history-a.md, \"Gone section\".\n")
	docs := newDocs("# Performance\n\n- [Held calls at scale](performance/history-a.md#x)\n- [B (branch `bee`)](#b)\n", "### Kept section\n")
	got, err := checkCitations(root, docs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got[0], `"Gone section"`) || !strings.HasPrefix(got[0], "docs/y.md") {
		t.Fatalf("problems %q, want only docs/y.md's citation of \"Gone section\"", got)
	}
	write("internal/x/z.go", "package x\n\n// See docs/performance.md, \"Nowhere\".\n")
	got, err = checkCitations(root, docs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("problems %q, want two (z.go's \"Nowhere\" too)", got)
	}
}

// repoRoot is the repository's root, two levels above this package.
const repoRoot = "../.."

// TestRepositoryCitationsResolve keeps every `docs/performance.md, "Title"`
// citation in the repository's code and docs findable: a section moved to
// the history must be in docs/performance.md's index.
func TestRepositoryCitationsResolve(t *testing.T) {
	docs, err := readNew(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkCitations(repoRoot, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestHistoryKeepsEveryOldSection runs the move's check against the page
// as it was before the restructure (main 83cc2d6), when git has that commit.
func TestHistoryKeepsEveryOldSection(t *testing.T) {
	old, err := readOld(t.Context(), "83cc2d6", "")
	if err != nil {
		t.Skipf("no git history here: %v", err)
	}
	docs, err := readNew(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkSections(old, docs) {
		t.Error(p)
	}
}
