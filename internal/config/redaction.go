package config

import (
	"fmt"
	"regexp"
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
