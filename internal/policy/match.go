package policy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrBadPattern is wrapped by the errors of [Match] and [Policy.Validate]
// for a glob that does not parse.
var ErrBadPattern = errors.New("syntax error in pattern")

// Match reports whether name matches the glob pattern. The syntax and
// semantics are those of [path.Match], except that '/' is an ordinary
// character (both '*' and '?' match it):
//
//	'*'          any sequence of characters, including none
//	'?'          any single character (one rune)
//	'[' [ '^' ] { c | lo '-' hi } ']'
//	             a character class; '^' negates it and it must not be empty
//	'\\' c       the character c
//
// Inside a class, '-' and ']' must be escaped with '\\' unless ']' closes a
// non-empty class. Matching is case-sensitive. The whole pattern is checked
// even when the name fails to match early, so the error, wrapping
// [ErrBadPattern], does not depend on the name.
func Match(pattern, name string) (bool, error) {
	g, err := compileGlob(pattern)
	if err != nil {
		return false, err
	}
	return g.match(name), nil
}

// IsGlob reports whether pattern contains a glob metacharacter ('*', '?',
// '[' or '\\'); a pattern without one matches only itself.
func IsGlob(pattern string) bool {
	return strings.ContainsAny(pattern, `*?[\`)
}

type tokenKind uint8

const (
	tokLiteral tokenKind = iota
	tokAnyOne
	tokStar
	tokClass
)

type runeRange struct{ lo, hi rune }

type token struct {
	kind   tokenKind
	r      rune        // tokLiteral
	negate bool        // tokClass
	ranges []runeRange // tokClass
}

func (t token) matches(r rune) bool {
	switch t.kind {
	case tokLiteral:
		return r == t.r
	case tokAnyOne:
		return true
	case tokClass:
		in := false
		for _, rg := range t.ranges {
			if rg.lo <= r && r <= rg.hi {
				in = true
				break
			}
		}
		return in != t.negate
	}
	return false
}

// glob is a parsed pattern.
type glob []token

func compileGlob(pattern string) (glob, error) {
	bad := func(why string) (glob, error) {
		return nil, fmt.Errorf("glob %q: %s: %w", pattern, why, ErrBadPattern)
	}
	var g glob
	s := pattern
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		switch r {
		case '*':
			if len(g) == 0 || g[len(g)-1].kind != tokStar {
				g = append(g, token{kind: tokStar})
			}
		case '?':
			g = append(g, token{kind: tokAnyOne})
		case '\\':
			if s == "" {
				return bad("trailing backslash")
			}
			r, n = utf8.DecodeRuneInString(s)
			s = s[n:]
			g = append(g, token{kind: tokLiteral, r: r})
		case '[':
			t := token{kind: tokClass}
			if len(s) > 0 && s[0] == '^' {
				t.negate = true
				s = s[1:]
			}
			for {
				if s == "" {
					return bad("unterminated character class")
				}
				if s[0] == ']' && len(t.ranges) > 0 {
					s = s[1:]
					break
				}
				var lo, hi rune
				var ok bool
				if lo, s, ok = classChar(s); !ok {
					return bad("bad character class")
				}
				hi = lo
				if len(s) > 0 && s[0] == '-' {
					if hi, s, ok = classChar(s[1:]); !ok {
						return bad("bad character range")
					}
				}
				t.ranges = append(t.ranges, runeRange{lo, hi})
			}
			g = append(g, t)
		default:
			g = append(g, token{kind: tokLiteral, r: r})
		}
	}
	return g, nil
}

// classChar reads one possibly escaped character of a class, as
// path.Match's getEsc does: an unescaped '-' or ']' is an error.
func classChar(s string) (rune, string, bool) {
	if s == "" || s[0] == '-' || s[0] == ']' {
		return 0, s, false
	}
	if s[0] == '\\' {
		s = s[1:]
		if s == "" {
			return 0, s, false
		}
	}
	r, n := utf8.DecodeRuneInString(s)
	return r, s[n:], true
}

// match runs the classic greedy wildcard match, backtracking only to the
// most recent star; it takes O(len(g)·len(name)) time at worst.
func (g glob) match(name string) bool {
	ti, ni := 0, 0
	starT, starN := -1, 0
	for {
		if ti < len(g) && g[ti].kind == tokStar {
			starT, starN = ti, ni
			ti++
			continue
		}
		if ni == len(name) {
			return ti == len(g)
		}
		r, n := utf8.DecodeRuneInString(name[ni:])
		if ti < len(g) && g[ti].matches(r) {
			ti++
			ni += n
			continue
		}
		if starT < 0 {
			return false
		}
		_, n = utf8.DecodeRuneInString(name[starN:])
		starN += n
		ni, ti = starN, starT+1
	}
}
