package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// detailArgs are call arguments of about size bytes: "objects" an array
// of small records, "keys" many top-level members, "strings" 4,000-
// character strings (the display keeps each whole).
func detailArgs(shape string, size int) string {
	var b strings.Builder
	switch shape {
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
			fmt.Fprintf(&b, `"key_%06d":"the value of member %d"`, i, i)
		}
		b.WriteString(`}`)
	case "strings":
		b.WriteString(`{"path":"dir/file.txt","parts":[`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q", strings.Repeat("y", 3990)+fmt.Sprintf("%010d", i))
		}
		b.WriteString(`]}`)
	}
	return b.String()
}

// BenchmarkDetailPage (fixes31) measures one GET of an approval's page
// whose arguments are about 1 MB (and 64 KB) in each shape, on a real
// SQLite store: B/op is what one view allocates, page-KB what it sends.
func BenchmarkDetailPage(b *testing.B) {
	for _, shape := range []string{"objects", "keys", "strings"} {
		for _, size := range []int{64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%dKB", shape, size>>10), func(b *testing.B) {
				e := newEnv(b, nil)
				r := e.request(1, detailArgs(shape, size))
				br := e.browser()
				br.signIn(bobTok)
				path := "/ui/approvals/" + string(r.ID)
				var n int
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					a := br.do("GET", path, nil)
					if a.status != http.StatusOK {
						b.Fatalf("status %d", a.status)
					}
					n = len(a.body)
				}
				b.ReportMetric(float64(n)/1024, "page-KB")
			})
		}
	}
}
