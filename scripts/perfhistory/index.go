package main

import (
	"fmt"
	"regexp"
	"strings"
)

// The indexes: each history file's head lists its sections between the line
// "Sections:" and the marker line; docs/performance.md lists every history
// file's sections after its "## History" heading, up to the next heading
// (a section appended since) or the end.
const (
	sectionsLine = "Sections:"
	markerPrefix = "<!-- verbatim from docs/performance.md"
	historyHead  = "## History"
)

// heading is one Markdown heading of a file: its level (the count of #),
// its text, and its anchor as GitHub renders it.
type heading struct {
	level  int
	text   string
	anchor string
}

// notAnchor is what GitHub drops from a heading's text to make its anchor:
// everything but letters, marks, digits, '_', '-' and spaces.
var notAnchor = regexp.MustCompile(`[^\p{L}\p{M}\p{N}_\- ]`)

// headings returns the headings of ls outside code fences, in order, with
// GitHub's anchors (a repeated anchor gets -1, -2, …). From is the first
// line whose headings are returned; those before it count for the
// repetitions only.
func headings(ls []string, from int) []heading {
	var out []heading
	seen := map[string]int{}
	fence := false
	for i, l := range ls {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(l, "#"))
		a := strings.ReplaceAll(notAnchor.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		if i >= from {
			out = append(out, heading{level: len(l) - len(strings.TrimLeft(l, "#")), text: text, anchor: a})
		}
	}
	return out
}

// listing is the index lines of hs: sections of level 2 and below, each
// indented by its depth under the file's top level, linked through prefix
// (a file path, or "" for the same file).
func listing(hs []heading, prefix string) []string {
	top := 0
	for _, h := range hs {
		if h.level >= 2 && (top == 0 || h.level < top) {
			top = h.level
		}
	}
	var out []string
	for _, h := range hs {
		if h.level < 2 {
			continue
		}
		out = append(out, fmt.Sprintf("%s- [%s](%s#%s)", strings.Repeat("  ", h.level-top), h.text, prefix, h.anchor))
	}
	return out
}

// markerAt returns the index of d's marker line, or -1.
func markerAt(d doc) int {
	for i, l := range d.lines {
		if strings.HasPrefix(l, markerPrefix) {
			return i
		}
	}
	return -1
}

// indexed returns docs with every index rewritten from the headings, and
// the problems that keep an index from being written (a history file
// without its "Sections:" line or marker, a current document without its
// "## History" heading). docs[0] is the current document.
func indexed(docs []doc) ([]doc, []string) {
	var problems []string
	out := make([]doc, len(docs))
	copy(out, docs)
	var all []string
	for i := 1; i < len(docs); i++ {
		d := docs[i]
		m := markerAt(d)
		s := -1
		for j := 0; j < m; j++ {
			if d.lines[j] == sectionsLine {
				s = j
			}
		}
		if m < 0 || s < 0 {
			problems = append(problems, d.path+": no \""+sectionsLine+"\" line above a marker line \""+markerPrefix+" …\"")
			continue
		}
		hs := headings(d.lines, m+1)
		ls := append(append([]string{}, d.lines[:s+1]...), "")
		ls = append(ls, listing(hs, "")...)
		ls = append(append(ls, ""), d.lines[m:]...)
		out[i] = doc{path: d.path, lines: ls}
		name := strings.TrimPrefix(d.path, "docs/")
		all = append(all, "", fmt.Sprintf("**[%s](%s)**", strings.TrimPrefix(name, "performance/"), name), "")
		all = append(all, listing(hs, name)...)
	}
	cur := docs[0].lines
	h := -1
	for i, l := range cur {
		if l == historyHead {
			h = i
		}
	}
	if h < 0 {
		return out, append(problems, currentDoc+": no \""+historyHead+"\" heading")
	}
	start := h + 1
	for start < len(cur) && !strings.HasPrefix(cur[start], "**[history-") && !strings.HasPrefix(cur[start], "#") {
		start++
	}
	end := start
	for end < len(cur) && !strings.HasPrefix(cur[end], "#") {
		end++
	}
	ls := append([]string{}, cur[:start]...)
	if len(all) > 0 {
		ls = append(ls, all[1:]...) // all starts with a blank line
	}
	if end < len(cur) {
		ls = append(append(ls, ""), cur[end:]...)
	}
	out[0] = doc{path: docs[0].path, lines: ls}
	return out, problems
}

// staleIndexes reports each file whose index does not list its headings.
func staleIndexes(docs []doc) []string {
	fresh, problems := indexed(docs)
	for i := range docs {
		if strings.Join(fresh[i].lines, "\n") != strings.Join(docs[i].lines, "\n") {
			problems = append(problems, docs[i].path+": its index does not list the sections as they are (go run ./scripts/perfhistory -write-index)")
		}
	}
	return problems
}
