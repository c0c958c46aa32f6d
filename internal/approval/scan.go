package approval

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// scanPatternsFrom is the length from which the display looks for the
// Redaction patterns' literal prefixes in its walk over a string that is
// not printable ASCII (stringScan.found) instead of once per pattern.
// Below it, a pattern whose prefix the string lacks is skipped after a
// substring search (mayMatch), without building the prefix table.
const scanPatternsFrom = 1 << 10

// A stringScan is what one walk over a string (scan) finds: the runes it
// has that the display flags, in order of first appearance and each once;
// its length in runes (as utf8.RuneCountInString counts them); and, when
// the walk was given a prefixIndex, which patterns may match it.
type stringScan struct {
	flagged []rune
	runes   int
	// found has bit k set when Patterns[k] may match: the first two
	// bytes of its literal prefix occur in the string, or the index
	// cannot tell (prefixIndex.always).
	found uint64
}

// A prefixIndex finds the first two bytes of the Redaction patterns'
// literal prefixes (regexp.LiteralPrefix: a string that begins every
// match) in the walk scan makes over a string anyway, without a branch per
// byte: a pattern whose pair does not occur cannot match and is not run.
// One pass for all of them instead of one per pattern (each
// regexp.MatchString searches the string for its prefix).
type prefixIndex struct {
	// first and second have bit k set at the first and the second byte
	// of pattern k's prefix: first[a]&second[b] are the patterns whose
	// prefix starts with a, b. Only pairs of ASCII bytes are indexed:
	// scan visits every ASCII byte and skips the bytes of other runes.
	first, second [utf8.RuneSelf]uint64
	// always has bit k set for the patterns the index cannot rule out:
	// no literal prefix, one of one byte or one whose first two bytes
	// are not both ASCII. Patterns from the 64th on are not indexed
	// (mayMatch).
	always uint64
}

// add indexes patterns (the Redaction's) into the empty ix.
func (ix *prefixIndex) add(patterns []*regexp.Regexp) {
	for k := range min(len(patterns), 64) {
		p, _ := patterns[k].LiteralPrefix()
		if len(p) < 2 || p[0] >= utf8.RuneSelf || p[1] >= utf8.RuneSelf {
			ix.always |= 1 << k
			continue
		}
		ix.first[p[0]] |= 1 << k
		ix.second[p[1]] |= 1 << k
	}
}

// mayMatch reports whether Patterns[k] (re) can match s: false only when
// its literal prefix does not occur in s. found is s's stringScan.found
// when indexed says it was taken over s as it is now with the index (then
// nothing else is read); otherwise the prefix is searched for in s.
func mayMatch(k int, re *regexp.Regexp, s string, found uint64, indexed bool) bool {
	if indexed && k < 64 {
		return found&(1<<k) != 0
	}
	p, _ := re.LiteralPrefix()
	return p == "" || strings.Contains(s, p)
}

// pairs is what scan's found would be for s: the patterns whose prefix's
// first two bytes occur in s, or that the index cannot rule out, without
// scan's other work (for keys, which the display does not scan).
func (ix *prefixIndex) pairs(s string) uint64 {
	found := ix.always
	var after uint64 // as in scan: none after a byte past ASCII
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			after = 0
			continue
		}
		found |= after & ix.second[c]
		after = ix.first[c]
	}
	return found
}

// scan walks s once (see stringScan); ix, when not nil, also looks for the
// patterns' prefixes.
func scan(s string, ix *prefixIndex) stringScan {
	var sc stringScan
	if ix == nil {
		ix = &noPrefixes
	}
	found := ix.always
	var after uint64 // ix.first of the byte before (none after a rune past ASCII)
	extra := 0       // bytes past the first of multi-byte runes: runes = len(s) - extra
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			found |= after & ix.second[c]
			after = ix.first[c]
			i++
			if !quietASCII[c] && !containsRune(sc.flagged, rune(c)) { // C0 but tab and line feed, DEL
				sc.flagged = append(sc.flagged, rune(c))
			}
			continue
		}
		after = 0
		if n := skipSafe(s, i); n != 0 {
			i += n
			extra += n - 1
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		extra += size - 1
		if flagged(r) && !containsRune(sc.flagged, r) {
			sc.flagged = append(sc.flagged, r)
		}
	}
	sc.runes, sc.found = len(s)-extra, found
	return sc
}

// noPrefixes is the index of no pattern: scan without prefixes.
var noPrefixes prefixIndex

// warnRunes adds the warning of each flagged rune in rs, in order, for the
// string or key at path (verb: "contains" or "key contains").
func (d *displayer) warnRunes(rs []rune, path []pathStep, verb string) {
	for _, r := range rs {
		d.warn(fmt.Sprintf("%s: %s U+%04X %s", location(path), verb, r, runeName(r)))
	}
}

// skipSafe is the length of the UTF-8 sequence that starts at s[i] (a
// byte past ASCII) when it encodes a rune the display never flags, and 0
// otherwise (then the rune is decoded and checked).
func skipSafe(s string, i int) int {
	c := s[i]
	if n := safeLead[c]; n != 0 {
		return int(n)
	}
	if c&0xF0 == 0xE0 && i+2 < len(s) {
		if c2 := s[i+1]; c2&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 && safe3[c&0x0F]>>(c2&0x3F)&1 != 0 {
			return 3
		}
	}
	return 0
}

// safe3 is, for each lead byte 0xE0–0xEF of a three-byte UTF-8 sequence
// (by its low four bits), a bit per second byte (by its low six bits), set
// when none of the 64 runes that start with those two bytes is flagged.
// The runes of U+0800–U+3FFF, which safeLead leaves to be decoded one by
// one (their blocks hold a few flagged runes), are then mostly skipped
// too: kana, CJK punctuation, Devanagari and the other Indic scripts,
// Thai, Georgian, Ethiopic, general punctuation past U+206F. Overlong
// (0xE0 0x80–0x9F) and surrogate (0xED 0xA0–0xBF) sequences have no bit.
// TestSafe3IsNotFlagged checks every bit against the base's flagged runes.
var safe3 = [16]uint64{
	0x0: 0xfffffff300000000,                                            // 0xE0: U+0880–U+08BF (U+0890, U+0891), U+08C0–U+08FF (U+08E2)
	0x1: 0xfffffffebfffffdf,                                            // 0xE1: U+1140–U+117F (U+115F, U+1160), U+1780–U+17BF (U+17B4, U+17B5), U+1800–U+183F (U+180E)
	0x2: 0xfffffffffffffffc,                                            // 0xE2: U+2000–U+207F (U+200B–U+200F, U+2028–U+202E, U+2060–U+206F)
	0x3: 0xffffffffffffffdf,                                            // 0xE3: U+3140–U+317F (U+3164)
	0x4: ^uint64(0), 0x5: ^uint64(0), 0x6: ^uint64(0), 0x7: ^uint64(0), // 0xE4–0xEE: safeLead skips them already
	0x8: ^uint64(0), 0x9: ^uint64(0), 0xA: ^uint64(0), 0xB: ^uint64(0), 0xC: ^uint64(0),
	0xD: 0x00000000ffffffff, // 0xED: U+D000–U+D7FF; 0xA0–0xBF would be surrogates
	0xE: ^uint64(0),
	0xF: 0x37ffffffffffffff, // 0xEF: U+FEC0–U+FEFF (U+FEFF), U+FF80–U+FFBF (U+FFA0), U+FFC0–U+FFFF (U+FFF9–U+FFFB)
}
