package approval

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// atChunkEdges places raw where the streamed hash cuts its text (attack28):
// after a string that ends shift bytes before hashChunk (so raw's tokens
// straddle the first flush), or inside a string whose text before raw is
// that long (so raw's escapes and runes straddle the run pieces of
// hashChunk/8 and the flush). The fuzzer alone never makes a document of
// 16 KB.
func atChunkEdges(raw []byte, shift int) [][]byte {
	pad := strings.Repeat("p", max(0, hashChunk-shift))
	return [][]byte{
		[]byte(`["` + pad + `",` + string(raw) + `]`),
		[]byte(`["` + pad + string(raw) + `"]`),
		[]byte(`{"k":"` + pad + `\n` + string(raw) + `"}`),
	}
}

// FuzzOracleAtChunkEdges: documents past the hash's chunk, with the fuzzed
// text where the streamed hash flushes and cuts strings into pieces, agree
// with the independent RFC 8785 oracle (Canonicalize, Hash and
// HashDisplayCanonical), and HashDisplayCanonical's hash under the default
// redaction is Hash's.
func FuzzOracleAtChunkEdges(f *testing.F) {
	for _, s := range []string{
		`0`, `"\u00e9\ud83d\ude00\n\\\""`, `\u00e9\ud83d\ude00`, `é😀`, `\ud800`, "\xed\xa0\x80",
		`\u0000`, `{"a":"\u0001","b":[1,2]}`, "\xc3", "\xe2\x82", `\`, `\u12`, `x\"y`,
		`-1.5e-400`, `123456789012345678901234567890`,
	} {
		for _, shift := range []uint16{0, 1, 2, 3, 5, 6, 7, 12, 2048, 2049} {
			f.Add([]byte(s), shift)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, shift uint16) {
		pad := hashChunk - int(shift%4096)
		for _, doc := range atChunkEdges(raw, int(shift%4096)) {
			checkAgainstOracle(t, doc)
			// The display cuts the long string where raw's escapes and
			// runes start (a limit in runes a few past the padding).
			rd := DefaultRedaction()
			rd.MaxString = pad + int(shift%8)
			checkShownAtEdges(t, doc, rd)
			checkShownAtEdges(t, doc, DefaultRedaction())
		}
	})
}

// checkShownAtEdges checks HashDisplayCanonical of doc against Hash,
// Display and Canonicalize, as FuzzHashDisplayCanonical does.
func checkShownAtEdges(t *testing.T, doc []byte, rd Redaction) {
	t.Helper()
	h, herr := Hash(doc)
	got, gerr := HashDisplayCanonical(slices.Clone(doc), rd)
	if (herr == nil) != (gerr == nil) || (herr == nil && got.Hash != h) {
		t.Fatalf("HashDisplayCanonical: %s %v; Hash: %s %v", got.Hash, gerr, h, herr)
	}
	if herr != nil {
		return
	}
	disp, warnings, err := Display(doc, rd)
	if err != nil || !bytes.Equal(got.Display, disp) || !slices.Equal(got.Warnings, warnings) {
		t.Fatalf("copy %.200q %q, Display's %.200q %q (%v)", got.Display, got.Warnings, disp, warnings, err)
	}
	if !json.Valid(disp) || !utf8.Valid(disp) {
		t.Fatalf("display copy %.300q is not valid JSON", disp)
	}
	if want, err := Canonicalize(disp); got.Depth < MaxDepth && (err != nil || !bytes.Equal(got.Canonical, want)) {
		t.Fatalf("canonical %.200q, Canonicalize of the copy %.200q (%v)", got.Canonical, want, err)
	}
}

// TestOracleAtChunkEdges runs the edges for every shift of a few texts
// whose escapes and runes are longer than one byte.
func TestOracleAtChunkEdges(t *testing.T) {
	texts := []string{`\u00e9\ud83d\ude00\n\"\\\/`, `é😀ab`, `\u0000\u001f`, `\ud83d\ude00`}
	if testing.Short() {
		texts = texts[:1]
	}
	for _, s := range texts {
		for shift := range 16 {
			for _, doc := range atChunkEdges([]byte(s), shift) {
				checkAgainstOracle(t, doc)
				rd := DefaultRedaction()
				rd.MaxString = hashChunk - shift + shift%8
				checkShownAtEdges(t, doc, rd)
			}
			for _, doc := range atChunkEdges([]byte(s), 2048+shift) {
				checkAgainstOracle(t, doc)
			}
		}
	}
}
