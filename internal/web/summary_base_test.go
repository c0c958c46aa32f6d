package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// summarizeWholeBase is summarizeWhole as it was on main bfe5965 (args29's
// base), with attack30's quoting of keys and values (rowKey, rowEscape):
// the whole display copy parsed into a node tree with
// json.Decoder.Token, then the line built from it. The summary must stay
// exactly what this gives (TestSummaryAsBase, FuzzSummaryAsBase).
func summarizeWholeBase(display json.RawMessage, maxLen int) (string, bool) {
	n, err := parseValue(display)
	if err != nil {
		return visible(string(display)), false
	}
	var b strings.Builder
	whole := true
	switch n.Kind {
	case "object":
		if len(n.Items) == 0 {
			b.WriteString("(no arguments)")
		}
		for i, m := range n.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(rowKey(m.Key))
			b.WriteString(": ")
			v, w := shortValueBase(m)
			b.WriteString(v)
			whole = whole && w
		}
	default:
		v, w := shortValueBase(n)
		b.WriteString(v)
		whole = whole && w
	}
	s := b.String()
	if utf8.RuneCountInString(s) > maxLen {
		s = string([]rune(s)[:maxLen-1]) + "…"
		whole = false
	}
	return s, whole
}

func shortValueBase(n node) (string, bool) {
	switch n.Kind {
	case "string":
		s := strings.ReplaceAll(n.Str, "\n", "⏎")
		cut := cutValue(s, valueLen)
		return `"` + visible(rowEscape(cut)) + `"`, cut == s
	case "object":
		return fmt.Sprintf("{%d %s}", len(n.Items), plural(len(n.Items), "key", "keys")), len(n.Items) == 0
	case "array":
		return fmt.Sprintf("[%d %s]", len(n.Items), plural(len(n.Items), "item", "items")), len(n.Items) == 0
	}
	return n.Literal, true
}
