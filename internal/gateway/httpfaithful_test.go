package gateway

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestHTTPRefusesWhatTheSDKServesUnfaithfully (attack12): a POST body the
// go-sdk would serve although it is not one JSON-RPC message it keeps
// exactly is refused with a JSON-RPC error (400) and runs nothing: bytes
// after the JSON object (the SDK served "{…} trailing" and "{…}{}"), an
// id it answered under another (1.5 as 1, 12345678901234567890123 as
// -9223372036854775808). On a 2026-07-28 POST (no session) and on a
// go-sdk client's 2025-11-25 session; a well-formed call is still served.
func TestHTTPRefusesWhatTheSDKServesUnfaithfully(t *testing.T) {
	f := newLeanFixture(t, nil)
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	sid := cs.ID()
	legacy := func(id, tail string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}` + tail
	}
	cases := []struct {
		name, body, sid, want, wantID string
	}{
		{"2026 trailing bytes", modernCallBody("1", "up__echo", `{}`, "") + " trailing", "", "parse error", "null"},
		{"2026 two objects", modernCallBody("1", "up__echo", `{}`, "") + "{}", "", "parse error", "null"},
		{"2026 fractional id", modernCallBody("1.5", "up__echo", `{}`, ""), "", "cannot be kept exactly", "1.5"},
		{"2026 huge id", modernCallBody("12345678901234567890123", "up__echo", `{}`, ""), "", "cannot be kept exactly", "12345678901234567890123"},
		{"session trailing bytes", legacy("2", " x"), sid, "parse error", "null"},
		{"session fractional id", legacy("2.5", ""), sid, "cannot be kept exactly", "2.5"},
	}
	for _, tc := range cases {
		hdr := map[string]string{}
		if tc.sid != "" {
			hdr = map[string]string{"Mcp-Session-Id": tc.sid, "MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "", "Mcp-Name": ""}
		}
		st, _, b := modernPost(t, f.base, "up__echo", tc.body, hdr)
		if st != http.StatusBadRequest || !bytes.Contains(b, []byte(tc.want)) || !bytes.Contains(b, []byte(`"id":`+tc.wantID)) {
			t.Errorf("%s: %d %s, want 400 naming %q under id %s", tc.name, st, b, tc.want, tc.wantID)
		}
	}
	if n := f.h.count("echo"); n != 0 {
		t.Fatalf("echo ran %d times on refused bodies", n)
	}
	st, _, b := modernPost(t, f.base, "up__echo", modernCallBody("7", "up__echo", `{}`, ""), nil)
	if st != http.StatusOK || !strings.Contains(string(b), `"id":7,`) {
		t.Fatalf("a well-formed call: %d %s", st, b)
	}
	<-f.h.args
}

// TestLeanDuplicateInFlightIDAnswersTheID (attack12): a second POST on a
// session reusing the id of a call still held there is refused under
// that id; the error used to carry the id's bytes base64-encoded ("Mw=="
// for 3), so the client could not match it.
func TestLeanDuplicateInFlightIDAnswersTheID(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	hdr := map[string]string{"Mcp-Session-Id": cs.ID(), "MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "", "Mcp-Name": ""}
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__big","arguments":{"n":1}}}`
	first := make(chan []byte, 1)
	go func() {
		_, _, b := modernPost(t, f.base, "up__big", body, hdr)
		first <- b
	}()
	f.waitState(t, approval.StatePending, 1)
	st, _, b := modernPost(t, f.base, "up__big", body, hdr)
	if st != http.StatusBadRequest || !bytes.Contains(b, []byte(`"id":3`)) || !bytes.Contains(b, []byte("duplicate in-flight")) {
		t.Fatalf("a second POST with the held call's id: %d %s, want 400 under id 3", st, b)
	}
	f.approveNext(t)
	if b := <-first; !bytes.Contains(b, []byte(`"id":3,`)) || bytes.Contains(b, []byte(`"error"`)) {
		t.Fatalf("the held call: %s", b)
	}
	if n := f.h.count("big"); n != 1 {
		t.Fatalf("big ran %d times, want 1", n)
	}
}
