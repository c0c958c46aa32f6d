package web_test

import (
	"fmt"
	"net/http"
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
