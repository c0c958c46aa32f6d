package gateway

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// trimCutReference is trimCut by its definition: line without its longest
// ending (of fewer bytes than the shape) that is the start of one of
// shapes, tried one length at a time.
func trimCutReference(shapes []envShape, line string) string {
	drop := 0
	for _, h := range shapes {
		for k := 1; k < len(h.text) && k <= len(line); k++ {
			if k > drop && strings.HasSuffix(line, h.text[:k]) {
				drop = k
			}
		}
	}
	return line[:len(line)-drop]
}

// TestTrimCutDropsLongestStart: trimCut drops the same ending as its
// definition for lines and environments drawn from a small alphabet (so
// that shapes overlap themselves and the line's end often, as "abab" or
// "aaab" do), values up to 40 bytes and lines up to 60.
func TestTrimCutDropsLongestStart(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab\n"[r.IntN(3)]
		}
		return string(b)
	}
	for i := range 3000 {
		env := map[string]string{}
		for j := range r.IntN(4) + 1 {
			env[fmt.Sprint("V", j)] = word(r.IntN(40) + 1)
		}
		red := newEnvRedactor(env)
		line := word(r.IntN(60))
		if got, want := red.trimCut(line), trimCutReference(red.hide, line); got != want {
			t.Fatalf("case %d: env %q, line %q: trimCut = %q, want %q", i, env, line, got, want)
		}
	}
}

// BenchmarkTrimCut: trimCut of a line cut at maxStderrLine, for a child
// with 64 environment values. "repeating": values and line are runs of
// one byte, the line ending in another, so every start of every value
// matches the line's end up to its last byte (the quadratic case of
// trying each length); "random": printable random values of 16 to 256
// bytes and a random line.
func BenchmarkTrimCut(b *testing.B) {
	r := rand.New(rand.NewPCG(39, 3))
	const printable = " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"
	random := func(n int) string {
		c := make([]byte, n)
		for i := range c {
			c[i] = printable[r.IntN(len(printable))]
		}
		return string(c)
	}
	cases := []struct {
		name string
		env  map[string]string
		line string
	}{
		{"repeating", map[string]string{}, strings.Repeat("A", maxStderrLine-1) + "C"},
		{"random", map[string]string{}, random(maxStderrLine)},
	}
	for i := range 64 {
		cases[0].env[fmt.Sprint("V", i)] = strings.Repeat("A", maxStderrLine-i)
		cases[1].env[fmt.Sprint("V", i)] = random(16 + r.IntN(241))
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			red := newEnvRedactor(c.env)
			for b.Loop() {
				_ = red.trimCut(c.line)
			}
		})
	}
}
