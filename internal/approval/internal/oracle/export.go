package oracle

// Flagged is flagged: the runes the base's display copy escapes and
// warns about.
func Flagged(r rune) bool { return flagged(r) }

// CompareUTF16 is compareUTF16: the base's order of object keys.
func CompareUTF16(a, b string) int { return compareUTF16(a, b) }
