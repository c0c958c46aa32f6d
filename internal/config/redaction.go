package config

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"

	"toolgate/internal/approval"
)

// Redaction returns approval.DefaultRedaction extended with approvals.redact:
// extra key names (normalized as approval.Redaction documents) and extra
// value patterns. A pattern that does not compile is an error (Validate
// reports it too).
func (c Config) Redaction() (*approval.Redaction, error) {
	rd := approval.DefaultRedaction()
	for _, k := range c.Approvals.Redact.Keys {
		rd.Keys = append(rd.Keys, normalizeKey(k))
	}
	for _, p := range c.Approvals.Redact.Patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("approvals.redact.patterns: %q: %w", p, err)
		}
		rd.Patterns = append(rd.Patterns, re)
	}
	return &rd, nil
}

// normalizeKey lowercases k and drops every rune that is not a letter or digit.
func normalizeKey(k string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, k)
}

// emptyMatch reports whether the regexp p (as regexp.Compile parses it)
// can match an empty stretch of text anywhere: the empty string itself, or
// an empty stretch inside a longer text, as `\b` or `x*\b` match between
// two characters. Such a match covers nothing: the display would insert a
// marker that hides nothing (attack31, fixes32). The test is on p's syntax
// tree: some way through p consumes no character, whatever its empty-width
// assertions (^, $, \A, \z, \b, \B) need; a pattern whose assertions can
// never all hold (`\b\B`) is refused too, as it can never hide anything.
// A p that does not parse reports false.
func emptyMatch(p string) bool {
	re, err := syntax.Parse(p, syntax.Perl)
	return err == nil && nullable(re)
}

// nullable reports whether re has a way through it that consumes no
// character, empty-width assertions counted as holding.
func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpCapture, syntax.OpPlus:
		return nullable(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !nullable(sub) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		return slices.ContainsFunc(re.Sub, nullable)
	default: // OpNoMatch, OpCharClass, OpAnyCharNotNL, OpAnyChar: one character or none
		return false
	}
}
