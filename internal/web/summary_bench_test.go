package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
)

// largeArgs returns call arguments of about size bytes in one of the
// shapes held calls carry:
//
//   - strings: a path, a short text and an array of 4,000-character
//     strings (the display keeps each whole: MaxString is 4,096);
//   - objects: an array of small records;
//   - keys: many top-level members (the summary shows the first few);
//   - secret: a bearer token in the first member, then strings.
func largeArgs(shape string, size int) json.RawMessage {
	var b strings.Builder
	switch shape {
	case "strings", "secret":
		if shape == "secret" {
			b.WriteString(`{"header":"Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789 and more text after it",`)
		} else {
			b.WriteString(`{`)
		}
		b.WriteString(`"path":"dir/file.txt","content":"line one\nline two","parts":[`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q", strings.Repeat("y", 3990)+fmt.Sprintf("%010d", i))
		}
		b.WriteString(`]}`)
	case "objects":
		b.WriteString(`{"table":"rows","rows":[`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"id":%d,"name":"row number %d","tags":["a","b"],"ok":true}`, i, i)
		}
		b.WriteString(`]}`)
	case "keys":
		b.WriteString(`{`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"key_%06d":"the value of member %d, ünïcödé"`, i, i)
		}
		b.WriteString(`}`)
	default:
		panic("shape " + shape)
	}
	return json.RawMessage(b.String())
}

// largeDisplay is the display copy the gate stores for largeArgs.
func largeDisplay(tb testing.TB, shape string, size int) json.RawMessage {
	tb.Helper()
	d, _, err := approval.Display(largeArgs(shape, size), approval.DefaultRedaction())
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

var benchShapes = []string{"strings", "objects", "keys", "secret"}

var benchSizes = []struct {
	name string
	size int
}{{"64KB", 64 << 10}, {"1MB", 1 << 20}}

// BenchmarkListRows (args29) is the list's work for a page of 50 held
// calls with large arguments: newRow for each (the summary, eligibility,
// times). It reports bytes and allocations per row.
func BenchmarkListRows(b *testing.B) {
	const rows = 50
	now := time.Now().UTC()
	c := api.Caller{Principal: approval.Principal{ID: "bob", Kind: "human"}, Roles: []string{api.RoleApprover}}
	for _, shape := range benchShapes {
		for _, sz := range benchSizes {
			b.Run(shape+"/"+sz.name, func(b *testing.B) {
				a := api.Approval{ID: "01900000-0000-7000-8000-000000000001", State: "pending", Server: "fs", Tool: "write_file",
					RequestedBy: "agent", Rule: "writes", CreatedAt: now, ExpiresAt: now.Add(time.Hour), RequiredApprovals: 1,
					Arguments: largeDisplay(b, shape, sz.size)}
				b.SetBytes(int64(len(a.Arguments)) * rows)
				b.ReportAllocs()
				var last row
				for b.Loop() {
					for range rows {
						last = newRow(a, c, now)
					}
				}
				b.ReportMetric(float64(testing.AllocsPerRun(1, func() { last = newRow(a, c, now) })), "allocs/row")
				_ = last
			})
		}
	}
}

// BenchmarkSummary (args29) is the summary alone, the base's
// (summarizeWholeBase) and summarizeWhole side by side in one run, for
// paired comparisons.
func BenchmarkSummary(b *testing.B) {
	impls := []struct {
		name string
		f    func(json.RawMessage, int) (string, bool)
	}{{"base", summarizeWholeBase}, {"new", summarizeWhole}}
	for _, shape := range benchShapes {
		for _, sz := range benchSizes {
			d := largeDisplay(b, shape, sz.size)
			for _, im := range impls {
				b.Run(shape+"/"+sz.name+"/"+im.name, func(b *testing.B) {
					b.SetBytes(int64(len(d)))
					b.ReportAllocs()
					for b.Loop() {
						im.f(d, summaryLen)
					}
				})
			}
		}
	}
}

// BenchmarkDetailTree (args29) is what the approval's own page makes of
// large arguments beyond its row: the whole display copy as a node tree
// (parseValue; the page shows every value, so this stays whole).
func BenchmarkDetailTree(b *testing.B) {
	for _, shape := range benchShapes {
		for _, sz := range benchSizes {
			d := largeDisplay(b, shape, sz.size)
			b.Run(shape+"/"+sz.name, func(b *testing.B) {
				b.SetBytes(int64(len(d)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := parseValue(d); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
