package gateway

import (
	"strings"
	"testing"
)

// BenchmarkScanLeanRequest is the lean front's read of a POST body of the
// perf harness's size (a 100-byte message argument).
func BenchmarkScanLeanRequest(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"` + strings.Repeat("x", 100) + `"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := scanLeanRequest(body); !ok {
			b.Fatal("not scanned")
		}
	}
}
