package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// attack45Bodies are POST bodies of a session: calls whose arguments
// hold backslashes, and cancels spelled every way the SDK reads one.
var attack45Bodies = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"line\nline\\\"q\""}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"path":"C:\\Users\\a"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","method":"\u006eotifications\u002fcancelled","params":{"requestId":"\u0061"}}`,
	`{"jsonrpc":"2.0","m\u0065thod":"notifications\/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","method":"tools/call","method":"notifications\/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","method":"notifications\/cancelled","method":"tools/call","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","params":{"requestId":"a\\b"},"method":"notifications\/cancelled"}`,
	`{"jsonrpc":"2.0","id":3,"method":"notifications\/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":1}} trailing\\`,
	`{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":1}`,
	`[{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":1}}]`,
	`{"jsonrpc":"2.0","method":"notifications\/cancelled","METHOD":"x\\y","params":{"requestId":1}}`,
}

// TestMaybeCancelPassesEveryCancel (branch attack45): maybeCancel, the
// allocation-free look cancelLean takes at every session POST, passes on
// every body cancelledID reads as a cancel (it may pass others: cancelledID
// decides), and passes over a call whose arguments hold backslashes
// (before, every such body was decoded whole).
func TestMaybeCancelPassesEveryCancel(t *testing.T) {
	for _, b := range attack45Bodies {
		if _, _, ok := cancelledID([]byte(b)); ok && !maybeCancel([]byte(b)) {
			t.Errorf("maybeCancel passed over a cancel cancelledID reads: %s", b)
		}
	}
	for _, b := range attack45Bodies[:2] {
		if maybeCancel([]byte(b)) {
			t.Errorf("maybeCancel took a call for a cancel: %s", b)
		}
	}
}

// FuzzMaybeCancel: whatever cancelledID reads as a cancel, maybeCancel
// passes.
func FuzzMaybeCancel(f *testing.F) {
	for _, b := range attack45Bodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b string) {
		if _, _, ok := cancelledID([]byte(b)); ok && !maybeCancel([]byte(b)) {
			t.Errorf("maybeCancel passed over a cancel cancelledID reads: %q", b)
		}
	})
}

// BenchmarkMaybeCancel is cancelLean's look at a session POST that is a
// call (not a cancel): /before, the check of ca0a3f75 (a body with a
// backslash read by cancelledID), /after, maybeCancel; for a call with
// plain arguments and for one with a 4 KiB text of escaped lines.
func BenchmarkMaybeCancel(b *testing.B) {
	text := strings.Repeat(`a line of a file\n`, 4096/18)
	for _, c := range []struct{ name, body string }{
		{"plain", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"to":"acct-1","amount":5}}}`},
		{"escaped-4KiB", fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__write","arguments":{"path":"a.txt","text":"%s"}}}`, text)},
	} {
		body := []byte(c.body)
		b.Run(c.name+"/before", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !strings.Contains(c.body, "notifications/cancelled") && strings.IndexByte(c.body, '\\') >= 0 {
					if _, _, ok := cancelledID(body); ok {
						b.Fatal("a cancel")
					}
				}
			}
		})
		b.Run(c.name+"/after", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if maybeCancel(body) {
					b.Fatal("a cancel")
				}
			}
		})
	}
}
