// Command perfhistory checks that the move of docs/performance.md's history
// into docs/performance/history-*.md lost nothing, that the sections cited
// from code and docs can still be found, and that the indexes list the
// sections; it can rewrite the indexes.
//
//	go run ./scripts/perfhistory              # against main 83cc2d6's docs/performance.md
//	go run ./scripts/perfhistory -rev REV     # against REV's (after moving more sections)
//	go run ./scripts/perfhistory -old FILE    # against a file
//	go run ./scripts/perfhistory -write-index # rewrite the indexes, then check
//
// Run it from the repository root. Three checks, each failure printed, exit
// status 1 if any:
//
//  1. Every section of the old docs/performance.md (a heading line outside
//     a code fence and the lines up to the next one) appears verbatim, as one
//     contiguous block of lines, in docs/performance.md or one of
//     docs/performance/*.md; and the sections found in the history files are
//     in the old file's order (files in name order, then line order).
//  2. Every citation of a section in a Go or Markdown file outside
//     docs/performance* — `docs/performance.md, "Name"` or `docs/performance.md,
//     branch X` (also across comment lines) — names text that
//     docs/performance.md contains (its index of the history lists every moved
//     heading); a citation of a history file must name one of that file's
//     headings.
//  3. Each history file's head lists its sections (between "Sections:" and
//     the marker line), and docs/performance.md's "## History" lists every
//     history file's, with GitHub's anchors. -write-index rewrites both
//     from the headings: after moving a section, run it.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

const (
	currentDoc = "docs/performance.md"
	historyDir = "docs/performance"
)

func main() {
	rev := flag.String("rev", "83cc2d6", "git revision whose "+currentDoc+" is the old file")
	oldPath := flag.String("old", "", "the old file (instead of -rev)")
	write := flag.Bool("write-index", false, "rewrite the history files' and "+currentDoc+"'s indexes first")
	flag.Parse()
	if *write {
		if err := writeIndexes("."); err != nil {
			fmt.Fprintln(os.Stderr, "perfhistory:", err)
			os.Exit(2)
		}
	}
	old, err := readOld(context.Background(), *rev, *oldPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfhistory:", err)
		os.Exit(2)
	}
	docs, err := readNew(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfhistory:", err)
		os.Exit(2)
	}
	problems := checkSections(old, docs)
	cites, err := checkCitations(".", docs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfhistory:", err)
		os.Exit(2)
	}
	problems = append(problems, cites...)
	problems = append(problems, staleIndexes(docs)...)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("perfhistory: %d problem(s)\n", len(problems))
		os.Exit(1)
	}
	fmt.Printf("perfhistory: all %d sections of the old file found verbatim and in order; citations resolve\n",
		len(splitSections(lines(old))))
}

func readOld(ctx context.Context, rev, path string) (string, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read the old file: %w", err)
		}
		return string(b), nil
	}
	out, err := exec.CommandContext(ctx, "git", "show", rev+":"+currentDoc).Output()
	if err != nil {
		return "", fmt.Errorf("git show %s:%s: %w", rev, currentDoc, err)
	}
	return string(out), nil
}

// doc is one file of the new set.
type doc struct {
	path  string
	lines []string
}

// readNew reads the current document and the history files under root, the
// current document first, then the history files in name order.
func readNew(root string) ([]doc, error) {
	paths := []string{currentDoc}
	hist, err := filepath.Glob(filepath.Join(root, historyDir, "*.md"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", historyDir, err)
	}
	sort.Strings(hist)
	for _, h := range hist {
		rel, err := filepath.Rel(root, h)
		if err != nil {
			return nil, fmt.Errorf("relative path of %s: %w", h, err)
		}
		paths = append(paths, filepath.ToSlash(rel))
	}
	docs := make([]doc, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		docs = append(docs, doc{path: p, lines: lines(string(b))})
	}
	return docs, nil
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// section is a heading line and the lines up to the next heading; start is
// the heading's index in the file (0-based).
type section struct {
	start int
	lines []string
}

// splitSections cuts ls at every Markdown heading outside a code fence. Lines
// before the first heading are a section of their own.
func splitSections(ls []string) []section {
	var out []section
	fence := false
	cur := section{}
	for i, l := range ls {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(l, "#") && len(cur.lines) > 0 {
			out = append(out, cur)
			cur = section{start: i}
		}
		cur.lines = append(cur.lines, l)
	}
	if len(cur.lines) > 0 {
		out = append(out, cur)
	}
	return out
}

// find returns the first index at or after from where block occurs in ls as
// contiguous lines, or -1.
func find(ls, block []string, from int) int {
	for i := from; i+len(block) <= len(ls); i++ {
		match := true
		for j, b := range block {
			if ls[i+j] != b {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// checkSections reports each section of old that is in none of docs, and
// each one found in a history file before the place the previous one was
// found there.
func checkSections(old string, docs []doc) []string {
	var problems []string
	// pos is where the last section was found in the history files:
	// docs index and the line after it.
	posDoc, posLine := 1, 0
	for _, s := range splitSections(lines(old)) {
		name := fmt.Sprintf("old line %d %q", s.start+1, s.lines[0])
		if d, at, ok := findFrom(docs, s.lines, posDoc, posLine); ok {
			posDoc, posLine = d, at+len(s.lines)
			continue
		}
		if find(docs[0].lines, s.lines, 0) >= 0 {
			continue // kept in the current document
		}
		if _, _, ok := findFrom(docs, s.lines, 1, 0); ok {
			problems = append(problems, name+": found, but out of the old file's order")
			continue
		}
		problems = append(problems, name+": not found verbatim in "+currentDoc+" or "+historyDir+"/")
	}
	return problems
}

// findFrom looks for block in docs[d:], starting at line `line` of docs[d].
func findFrom(docs []doc, block []string, d, line int) (int, int, bool) {
	for ; d < len(docs); d, line = d+1, 0 {
		if at := find(docs[d].lines, block, line); at >= 0 {
			return d, at, true
		}
	}
	return 0, 0, false
}

var (
	// commentJoin joins a comment's lines so that a citation broken across
	// them reads as one.
	commentJoin = regexp.MustCompile(`\n[ \t]*(?://|#|\*)?[ \t]*`)
	// citation matches a cite of the current document or a history file,
	// then the names that follow it: "Name", "Name" or branch `x`.
	citation = regexp.MustCompile("(docs/)?performance(/history-[0-9a-z-]+)?\\.md\\)?[,:]?\\s*\\(?((?:(?:\"[^\"]+\"|“[^”]+”|branch `?[A-Za-z0-9]+`?)(?:,\\s*|\\s+)?)*)")
	name     = regexp.MustCompile("\"([^\"]+)\"|“([^”]+)”|branch `?([A-Za-z0-9]+)`?")
)

// checkCitations reports every named citation in root's Go and Markdown
// files (outside docs/performance*) that the document it cites lacks.
func checkCitations(root string, docs []doc) ([]string, error) {
	text := map[string]string{}
	for _, d := range docs {
		text[d.path] = strings.Join(d.lines, "\n")
	}
	var problems []string
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	defer func() { _ = r.Close() }() // read only
	fsys := r.FS()
	err = fs.WalkDir(fsys, ".", func(rel string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if rel != "." && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules" || rel == historyDir || rel == "scripts/perfhistory") {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == currentDoc || (!strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, ".md")) {
			return nil
		}
		b, err := fs.ReadFile(fsys, rel)
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
		if !bytes.Contains(b, []byte("performance")) {
			return nil
		}
		joined := commentJoin.ReplaceAllString(string(b), " ")
		for _, m := range citation.FindAllStringSubmatch(joined, -1) {
			target := currentDoc
			if m[2] != "" {
				target = historyDir + m[2] + ".md"
			}
			for _, n := range name.FindAllStringSubmatch(m[3], -1) {
				cited := n[1] + n[2] + n[3]
				if p := resolve(text, target, cited); p != "" {
					problems = append(problems, rel+": "+p)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	return problems, nil
}

// resolve says what is wrong with a citation of cited in target, or "".
func resolve(text map[string]string, target, cited string) string {
	t, ok := text[target]
	if !ok {
		return fmt.Sprintf("cites %s, which does not exist", target)
	}
	if target == currentDoc {
		if !strings.Contains(t, cited) {
			return fmt.Sprintf("cites %s %q, which it does not contain (add it to its index of the history)", target, cited)
		}
		return ""
	}
	for _, l := range lines(t) {
		if strings.HasPrefix(l, "#") && strings.Contains(l, cited) {
			return ""
		}
	}
	return fmt.Sprintf("cites %s %q, which is none of its headings", target, cited)
}

// writeIndexes rewrites the indexes of the documents under root.
func writeIndexes(root string) error {
	docs, err := readNew(root)
	if err != nil {
		return err
	}
	fresh, problems := indexed(docs)
	if len(problems) > 0 {
		return fmt.Errorf("cannot write the indexes: %s", strings.Join(problems, "; "))
	}
	for i, d := range fresh {
		if strings.Join(d.lines, "\n") == strings.Join(docs[i].lines, "\n") {
			continue
		}
		// The files exist: WriteFile keeps their mode (the 0o600 is for a
		// file it would create, which it does not).
		if err := os.WriteFile(filepath.Join(root, d.path), []byte(strings.Join(d.lines, "\n")+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", d.path, err)
		}
	}
	return nil
}
