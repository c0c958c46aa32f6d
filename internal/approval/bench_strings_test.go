package approval

import (
	"encoding/json"
	"strings"
	"testing"
)

// stringArgs are 4 MB one-string arguments of three kinds of text: code
// (escaped tabs, line feeds and quotes), plain ASCII, and mixed Latin/CJK
// UTF-8 with a few escapes.
func stringArgs() map[string]json.RawMessage {
	const size = 4 << 20
	wrap := func(s string) json.RawMessage {
		return json.RawMessage(`{"path":"/tmp/x","content":"` + s + `","n":[1,2,3]}`)
	}
	return map[string]json.RawMessage{
		"code":  wrap(strings.Repeat(`\tif err != nil {\n\t\treturn fmt.Errorf(\"open %s: %w\", name, err)\n\t}\n`, size/64)),
		"ascii": wrap(strings.Repeat(`The quick brown fox jumps over the lazy dog. `, size/45)),
		"utf8":  wrap(strings.Repeat(`héllo wörld, 日本語のテキスト \"q\" `, size/48)),
	}
}

// BenchmarkStrings runs Hash, Display (DefaultRedaction and none),
// Canonicalize and HashDisplayCanonical on each 4 MB string argument.
func BenchmarkStrings(b *testing.B) {
	for _, name := range []string{"code", "ascii", "utf8"} {
		raw, rd := stringArgs()[name], DefaultRedaction()
		run := func(op string, f func() error) {
			b.Run(name+"/"+op, func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if err := f(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		run("hash", func() error { _, err := Hash(raw); return err })
		run("display", func() error { _, _, err := Display(raw, rd); return err })
		run("displayall", func() error { _, _, err := Display(raw, Redaction{}); return err })
		run("canonical", func() error { _, err := Canonicalize(raw); return err })
		run("hdc", func() error { _, err := HashDisplayCanonical(raw, rd); return err })
	}
}

// BenchmarkSmallArguments runs HashDisplayCanonical and Hash on the
// arguments of an ordinary call (the cost on every call).
func BenchmarkSmallArguments(b *testing.B) {
	rd := DefaultRedaction()
	for name, raw := range map[string]json.RawMessage{
		"message": json.RawMessage(`{"message":"hi"}`),
		"nested":  json.RawMessage(`{"path":"/tmp/x","content":"hello\nworld","mode":420,"opts":{"force":true,"tags":["a","b"]}}`),
	} {
		b.Run(name+"/hdc", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := HashDisplayCanonical(raw, rd); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/hash", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Hash(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
