package approval

import (
	"regexp"
	"slices"
	"strings"
)

// A match is the text s[start:end] that Redaction.Patterns[k] matches in
// a string or key.
type match struct{ start, end, k int }

// appendMatches appends to ms the matches of re (Patterns[k]) in s, as
// regexp's FindAllStringIndex finds them.
func appendMatches(ms []match, re *regexp.Regexp, k int, s string) []match {
	for _, loc := range re.FindAllStringIndex(s, -1) {
		ms = append(ms, match{start: loc[0], end: loc[1], k: k})
	}
	return ms
}

// hideMatches returns s with the text that the matches ms (found in s, in
// any order) cover replaced: each stretch that overlapping matches (or
// matches starting at the same byte) cover together by one marker(k), k
// the pattern of its match that starts first (the lowest k among those). The patterns all look in s as received: one
// after another, each in the text the ones before had rewritten, a marker
// (its spaces, its colon) kept a later pattern from matching, and what only
// that one covered was shown (a URL's password after a user that looks
// like an AWS access key id; attack32).
//
// When spans is not nil, the bytes of the result each marker takes are
// appended to it, in order (lookAlikes).
func hideMatches(s string, ms []match, marker func(k int) string, spans *[]span) string {
	slices.SortFunc(ms, func(a, b match) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return a.k - b.k
	})
	var b strings.Builder
	b.Grow(len(s))
	last := 0 // s[:last] is written
	for i := 0; i < len(ms); {
		cur := ms[i]
		for i++; i < len(ms) && (ms[i].start < cur.end || ms[i].start == cur.start); i++ {
			cur.end = max(cur.end, ms[i].end)
		}
		b.WriteString(s[last:cur.start])
		m := marker(cur.k)
		if spans != nil {
			*spans = append(*spans, span{b.Len(), b.Len() + len(m)})
		}
		b.WriteString(m)
		last = cur.end
	}
	b.WriteString(s[last:])
	return b.String()
}
