package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkInboxPage measures one GET /ui/ of a signed-in approver with
// 100 pending approvals (the inbox's page size) on a real SQLite store:
// session lookup, list, eligibility, rendering.
func BenchmarkInboxPage(b *testing.B) {
	e := newEnv(b, nil)
	for i := range 100 {
		e.request(i+1, fmt.Sprintf(`{"path":"dir/file-%d.txt","content":"line one\nline two","mode":420}`, i))
	}
	br := e.browser()
	br.signIn(bobTok)
	b.ResetTimer()
	for b.Loop() {
		if a := br.do("GET", "/ui/", nil); a.status != http.StatusOK {
			b.Fatalf("status %d", a.status)
		}
	}
}

// BenchmarkInboxPage10k (list28): GET /ui/ with 10,000 pending on SQLite,
// the newest 100 (the page) with display copies of LARGE KB (16 strings
// of 4,000 characters when LARGE is 64; 0 for small arguments like the
// rest). B/op is what one page view allocates.
func BenchmarkInboxPage10k(b *testing.B) {
	for _, large := range []int{0, 64} {
		b.Run(fmt.Sprintf("large=%dKB", large), func(b *testing.B) {
			e := newEnv(b, nil)
			pad := `"x"`
			if large > 0 {
				parts := make([]string, large/4)
				for i := range parts {
					parts[i] = fmt.Sprintf("%q", strings.Repeat("y", 4000))
				}
				pad = "[" + strings.Join(parts, ",") + "]"
			}
			for i := range 10_000 {
				p := `"x"`
				if i >= 9_900 {
					p = pad
				}
				e.request(i+1, fmt.Sprintf(`{"path":"dir/file-%d.txt","content":"line one\nline two","parts":%s}`, i, p))
			}
			br := e.browser()
			br.signIn(bobTok)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if a := br.do("GET", "/ui/", nil); a.status != http.StatusOK {
					b.Fatalf("status %d", a.status)
				}
			}
		})
	}
}
