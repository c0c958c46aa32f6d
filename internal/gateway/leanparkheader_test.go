package gateway

import (
	"net/http"
	"reflect"
	"testing"
)

// A parked call keeps its response's header in wire form (parkedHeader)
// and answers with the same header: every key, every value in order,
// none added; and what it keeps is smaller than the header's own text
// (no map per held call).
func TestParkedHeaderKeepsTheFrontsHeaders(t *testing.T) {
	for _, h := range []http.Header{
		{},
		{"Content-Type": {"application/json"}},
		{
			"Content-Type":                {"text/event-stream"},
			"Cache-Control":               {"no-cache, no-transform"},
			"Connection":                  {"keep-alive"},
			"Vary":                        {"Origin", "Authorization"},
			"Access-Control-Allow-Origin": {"https://app.example"},
			"X-Empty":                     {""},
		},
	} {
		kept := keepHeader(h)
		got, err := kept.header()
		if err != nil {
			t.Fatalf("%v: %v", h, err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("rebuilt header %v, want %v", got, h)
		}
		text := 0
		for k, vs := range h {
			for _, v := range vs {
				text += len(k) + len(v) + 4 // "Key: value\r\n"
			}
		}
		if len(kept) != text {
			t.Fatalf("kept %d bytes for %d bytes of header lines", len(kept), text)
		}
	}
}
