package gateway

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestHeartbeatWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "text/event-stream")
		hb := newHeartbeatWriter(rec, time.Second, 10*time.Second)
		body := func() string {
			synctest.Wait()
			hb.mu.Lock() // the beats write under mu
			defer hb.mu.Unlock()
			return rec.Body.String()
		}

		time.Sleep(5 * time.Second)
		if got := body(); got != "" {
			t.Fatalf("before arm: %q", got)
		}
		hb.arm()
		time.Sleep(time.Second)
		if got := body(); got != heartbeatComment || rec.Code != http.StatusOK {
			t.Fatalf("1s after arm: %q code %d flushed %v", got, rec.Code, rec.Flushed)
		}
		// The SDK's own header and event; silence is counted from its write.
		hb.WriteHeader(http.StatusOK)
		_, _ = hb.Write([]byte("data: x\n\n"))
		time.Sleep(9 * time.Second)
		if got := body(); got != heartbeatComment+"data: x\n\n" {
			t.Fatalf("9s after a write: %q", got)
		}
		time.Sleep(time.Second)
		if got := body(); got != heartbeatComment+"data: x\n\n"+heartbeatComment {
			t.Fatalf("10s after a write: %q", got)
		}
		hb.stop()
		time.Sleep(time.Minute)
		if got := body(); strings.Count(got, heartbeatComment) != 2 {
			t.Fatalf("after stop: %q", got)
		}
	})
}

func TestHeartbeatOnlyOnEventStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json")
		hb := newHeartbeatWriter(rec, time.Second, time.Second)
		hb.arm()
		time.Sleep(time.Minute)
		synctest.Wait()
		hb.mu.Lock()
		got := rec.Body.String()
		hb.mu.Unlock()
		if got != "" {
			t.Fatalf("heartbeat on a JSON response: %q", got)
		}
		hb.stop()
	})
}

func TestHeartbeatOnStandaloneStream(t *testing.T) {
	g := newGateway(t, nil, allowAll(), nil)
	url := serveHTTP(t, g, &HTTPOptions{Heartbeat: 10 * time.Millisecond}) + "/mcp"
	resp, body := post(t, url, aliceToken, "", initializeBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if r, b := post(t, url, aliceToken, sid, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", r.StatusCode, b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Accept", "text/event-stream")
	get, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer get.Body.Close()
	sc := bufio.NewScanner(get.Body)
	for sc.Scan() {
		if sc.Text() == strings.TrimSuffix(heartbeatComment, "\n\n") {
			return
		}
	}
	t.Fatalf("stream ended without a heartbeat: %v", sc.Err())
}

// headerSink is a ResponseWriter that keeps its header and drops the body.
type headerSink struct{ h http.Header }

func (s *headerSink) Header() http.Header         { return s.h }
func (s *headerSink) WriteHeader(int)             {}
func (s *headerSink) Write(p []byte) (int, error) { return len(p), nil }

// TestAnswerJSONHeaders: a lean call's answer alone goes with the headers
// Header.Set would give, the three values in the writer's own array: the
// length's text is its one allocation (issue 13: one list per Set, then
// one list for the three).
func TestAnswerJSONHeaders(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 100) + `"}]}}`)
	sink := &headerSink{h: http.Header{}}
	hb := &heartbeatWriter{w: sink}
	answer := func() {
		clear(sink.h)
		hb.undecided, hb.wroteHeader, hb.stopped = true, false, false
		if !hb.answerJSON(msg) {
			t.Fatal("an undecided response was not answered as JSON")
		}
	}
	answer()
	want := http.Header{}
	want.Set("Cache-Control", "no-cache, no-transform")
	want.Set("Content-Type", "application/json")
	want.Set("Content-Length", strconv.Itoa(len(msg)))
	if !reflect.DeepEqual(sink.h, want) {
		t.Fatalf("headers %v, want %v", sink.h, want)
	}
	if n := testing.AllocsPerRun(100, answer); n > 1 {
		t.Errorf("answering as JSON allocated %v times, want at most 1 (the length's text)", n)
	}
}
