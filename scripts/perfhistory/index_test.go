package main

import (
	"strings"
	"testing"
)

func TestHeadingAnchors(t *testing.T) {
	ls := lines("# Title\n\n## Side by side after steps 6–9 (2026-12-02, main 7418e04)\n\n```sh\n# comment\n```\n" +
		"### In-process benchmark (before → after)\n### What changed, step by step\n### What changed, step by step\n" +
		"### 10,000 held calls: `gctune.LimitSlack` 16 → 8 MiB (branch `heldpeak4`)\n### Per-call accounting, and two wake-ups/decodes less\n")
	var got []string
	for _, h := range headings(ls, 0) {
		got = append(got, h.anchor)
	}
	want := []string{
		"title",
		"side-by-side-after-steps-69-2026-12-02-main-7418e04",
		"in-process-benchmark-before--after",
		"what-changed-step-by-step",
		"what-changed-step-by-step-1",
		"10000-held-calls-gctunelimitslack-16--8-mib-branch-heldpeak4",
		"per-call-accounting-and-two-wake-upsdecodes-less",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("anchors\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestIndexedListsAMovedSection(t *testing.T) {
	hist := "# Performance history, a day\n\nSections:\n\n- [Old](#old)\n\n" + markerPrefix + " at X below this line -->\n\n### Old\n\ntext\n\n### Moved (2026-12-05, branch x)\n\nmore\n"
	cur := "# Performance\n\n## History\n\nIntro.\n\n**[history-a.md](performance/history-a.md)**\n\n- [Old](performance/history-a.md#old)\n\n### Appended (branch y)\n\nnew\n"
	docs := newDocs(cur, hist)
	if p := staleIndexes(docs); len(p) != 2 {
		t.Fatalf("stale: %q, want both files", p)
	}
	fresh, problems := indexed(docs)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	wantHist := "# Performance history, a day\n\nSections:\n\n- [Old](#old)\n- [Moved (2026-12-05, branch x)](#moved-2026-12-05-branch-x)\n\n" + markerPrefix + " at X below this line -->\n\n### Old\n\ntext\n\n### Moved (2026-12-05, branch x)\n\nmore"
	if got := strings.Join(fresh[1].lines, "\n"); got != wantHist {
		t.Errorf("history file\n%s\nwant\n%s", got, wantHist)
	}
	wantCur := "# Performance\n\n## History\n\nIntro.\n\n**[history-a.md](performance/history-a.md)**\n\n- [Old](performance/history-a.md#old)\n- [Moved (2026-12-05, branch x)](performance/history-a.md#moved-2026-12-05-branch-x)\n\n### Appended (branch y)\n\nnew"
	if got := strings.Join(fresh[0].lines, "\n"); got != wantCur {
		t.Errorf("current document\n%s\nwant\n%s", got, wantCur)
	}
	if p := staleIndexes(fresh); len(p) != 0 {
		t.Errorf("after the rewrite: %q", p)
	}
	broken := newDocs(cur, "# No head\n\n### Old\n")
	if _, p := indexed(broken); len(p) != 1 || !strings.Contains(p[0], "Sections:") {
		t.Errorf("a history file without its head: %q, want one problem naming the Sections: line", p)
	}
}

// TestRepositoryIndexesAreCurrent: every moved section is in its file's
// index and in docs/performance.md's.
func TestRepositoryIndexesAreCurrent(t *testing.T) {
	docs, err := readNew(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range staleIndexes(docs) {
		t.Error(p)
	}
}
