package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// eventSink is a ResponseWriter that checks every write against want.
type eventSink struct {
	h      http.Header
	want   []byte
	writes int
	wrong  bool
}

func (s *eventSink) Header() http.Header { return s.h }
func (s *eventSink) WriteHeader(int)     {}
func (s *eventSink) Write(p []byte) (int, error) {
	s.writes++
	s.wrong = s.wrong || !bytes.Equal(p, s.want)
	return len(p), nil
}

// TestWriteLeanRawAllocatesNothing: the answer of a lean call with the
// upstream's raw result is framed in a pooled buffer (issue 13: one
// allocation of the result's size per call before), and goes out as
// writeLastSSE's event.
func TestWriteLeanRawAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: sync.Pool drops its buffers at random")
	}
	raw := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 1000) + `"}]}`)
	id := json.RawMessage(`"call-7"`)
	want := sseMessagePrefix + `{"jsonrpc":"2.0","id":"call-7","result":` + string(raw) + `}` + sseMessageSuffix
	s := &eventSink{h: http.Header{}, want: []byte(want)}
	writeLeanRaw(s, id, raw)
	if s.writes != 1 || s.wrong {
		t.Fatalf("%d writes, wrong %v; want the one event %q", s.writes, s.wrong, want)
	}
	if n := testing.AllocsPerRun(100, func() { writeLeanRaw(s, id, raw) }); n != 0 {
		t.Errorf("writeLeanRaw allocated %v times per answer, want 0", n)
	}
	if s.writes != 102 || s.wrong {
		t.Errorf("%d writes, wrong %v; want 102 of the one event", s.writes, s.wrong)
	}
}
