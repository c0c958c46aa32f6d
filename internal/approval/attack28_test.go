package approval

import (
	"slices"
	"strings"
	"testing"
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
		for _, doc := range atChunkEdges(raw, int(shift%4096)) {
			checkAgainstOracle(t, doc)
			h, herr := Hash(doc)
			got, gerr := HashDisplayCanonical(slices.Clone(doc), DefaultRedaction())
			if (herr == nil) != (gerr == nil) || (herr == nil && got.Hash != h) {
				t.Fatalf("HashDisplayCanonical: %s %v; Hash: %s %v", got.Hash, gerr, h, herr)
			}
		}
	})
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
			}
			for _, doc := range atChunkEdges([]byte(s), 2048+shift) {
				checkAgainstOracle(t, doc)
			}
		}
	}
}
