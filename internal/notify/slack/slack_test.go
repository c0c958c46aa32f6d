package slack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/notify"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func pending() approval.Request {
	return approval.Request{
		ID: "01900000-0000-7000-8000-000000000001", State: approval.StatePending, Server: "fs", Tool: "write_file",
		Arguments:     []byte(`{"path": "a.txt", "content": "<!channel> see <https://evil.example|the docs> & more"}`),
		ArgumentsHash: "sha256:" + strings.Repeat("ab", 32), DisplayWarnings: []string{`"token" was <redacted>`},
		Rule: "writes", RequestedBy: "agent-1", OnBehalfOf: "<@U0BOSS>", CreatedAt: t0, ExpiresAt: t0.Add(5 * time.Minute), RequiredApprovals: 2,
		Reviews: []approval.Review{{By: "carol", Verdict: approval.VerdictApprove, At: t0}},
	}
}

// texts collects every text of a rendered message, by text type.
func texts(t *testing.T, m message) (plainTexts, mrkdwns []string) {
	t.Helper()
	b, err := json.Marshal(m.Blocks)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["text"].(string); ok {
				switch v["type"] {
				case "plain_text":
					plainTexts = append(plainTexts, s)
				case "mrkdwn":
					mrkdwns = append(mrkdwns, s)
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	var blocks any
	_ = json.Unmarshal(b, &blocks)
	walk(blocks)
	return plainTexts, mrkdwns
}

// buttons returns the action ids and values of the message's buttons.
func buttons(m message) map[string]string {
	out := map[string]string{}
	for _, b := range m.Blocks {
		if b["type"] != "actions" {
			continue
		}
		for _, e := range b["elements"].([]any) {
			el := e.(map[string]any)
			v, _ := el["value"].(string)
			if u, ok := el["url"].(string); ok {
				v = u
			}
			out[el["action_id"].(string)] = v
		}
	}
	return out
}

func TestRender(t *testing.T) {
	r := pending()
	m := render(r, renderOptions{publicURL: "https://tg.example", buttons: true})
	plains, mds := texts(t, m)
	all := strings.Join(append(append([]string{m.Text}, plains...), mds...), "\n")
	for _, want := range []string{
		"Approval needed: fs · write_file",
		`{"path":"a.txt","content":"<!channel> see <https://evil.example|the docs> & more"}`, // plain_text: shown as is, never parsed
		"*Requested by*\nagent-1 (for &lt;@U0BOSS&gt;)",
		"*Rule*\nwrites",
		"*Expires*\n<!date^1772366700^{date_short_pretty} {time}|2026-03-01 12:05 UTC>",
		"*Approvals*\n1 of 2",
		":warning: \"token\" was &lt;redacted&gt;",
		"Approval `" + string(r.ID) + "`",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("message lacks %q:\n%s", want, all)
		}
	}
	// Nothing taken from the request forms a mention or a link in mrkdwn.
	for _, s := range append(mds, m.Text) {
		for _, bad := range []string{"<@U0BOSS>", "<!channel>", "<https://evil"} {
			if strings.Contains(s, bad) {
				t.Errorf("mrkdwn text %q holds %q unescaped", s, bad)
			}
		}
	}
	want := map[string]string{
		"toolgate_open": "https://tg.example/ui/approvals/" + string(r.ID),
		ActionApprove:   string(r.ID) + " " + r.ArgumentsHash,
		ActionDeny:      string(r.ID) + " " + r.ArgumentsHash,
	}
	if got := buttons(m); !equalMaps(got, want) {
		t.Errorf("buttons = %v, want %v", got, want)
	}

	if got := buttons(render(r, renderOptions{})); len(got) != 0 {
		t.Errorf("buttons without chat approval or a public URL = %v, want none", got)
	}
	decided := r
	decided.State, decided.DecidedBy, decided.Reason = approval.StateDenied, "bob", "not <today>"
	m = render(decided, renderOptions{publicURL: "https://tg.example", buttons: true})
	if got := buttons(m); len(got) != 1 || got["toolgate_open"] == "" {
		t.Errorf("buttons of a decided request = %v, want only the inbox link", got)
	}
	plains, mds = texts(t, m)
	if !strings.Contains(plains[0], "Denied by bob: fs · write_file") || !strings.Contains(strings.Join(mds, "\n"), "*Decided by*\nbob: not &lt;today&gt;") {
		t.Errorf("decided message: %q %q", plains, mds)
	}
	for _, c := range []struct {
		state   approval.State
		decided string
		outcome approval.Outcome
		want    string
	}{
		{approval.StateApproved, "bob", "", "Approved by bob"},
		{approval.StateConsumed, "bob", "", "Approved by bob, running"},
		{approval.StateConsumed, "bob", approval.OutcomeOK, "Approved by bob, ran"},
		{approval.StateConsumed, "bob", approval.OutcomeToolError, "Approved by bob, ran, the tool reported an error"},
		{approval.StateConsumed, "bob", approval.OutcomeTransportError, "Approved by bob, transport error, it may not have run"},
		{approval.StateConsumed, "bob", approval.OutcomeCancelledAfterDispatch, "Approved by bob, cancelled after it was sent, it may have run"},
		// The instance died mid-dispatch: the message must not keep
		// saying "Approved by", nor claim the call ran.
		{approval.StateConsumed, "bob", approval.OutcomeUnknown, "Approved by bob, outcome unknown (the instance died), it may have run"},
		{approval.StateExpired, "", "", "Expired: nobody decided in time"},
		{approval.StateExpired, "bob", "", "Approved but not used in time"},
		{approval.StateCancelled, "", "", "Cancelled"},
		{approval.StateInvalidated, "bob", "", "Approved by bob, then invalidated: it did not run"},
	} {
		x := r
		x.State, x.DecidedBy, x.DispatchOutcome = c.state, c.decided, c.outcome
		if got := statusText(x); got != c.want {
			t.Errorf("statusText(%s) = %q, want %q", c.state, got, c.want)
		}
	}
	// explain50: what the dispatch re-check found, as the store records it.
	x := r
	x.State, x.DecidedBy, x.Reason = approval.StateInvalidated, "bob", `policy now denies the call (rule "no transfers")`
	if got, want := statusText(x), `Approved by bob, then invalidated (policy now denies the call (rule "no transfers")): it did not run`; got != want {
		t.Errorf("statusText(invalidated with its reason) = %q, want %q", got, want)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// standIn is a local stand-in for Slack's Web API (Slack cannot run here):
// it records calls and answers chat.postMessage with a new ts.
type standIn struct {
	mu     sync.Mutex
	calls  []apiCall
	answer func(method string, body map[string]any) (int, string) // nil: ok
	ts     int
}

type apiCall struct {
	Method, Auth string
	Body         map[string]any
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	s.mu.Lock()
	s.calls = append(s.calls, apiCall{method, r.Header.Get("Authorization"), body})
	answer := s.answer
	s.ts++
	ts := s.ts
	s.mu.Unlock()
	if answer != nil {
		if status, text := answer(method, body); status != 0 {
			if status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "7")
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, text)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C0OPS", "ts": fmt.Sprintf("1700000000.%06d", ts)})
}

func (s *standIn) got() []apiCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]apiCall(nil), s.calls...)
}

func TestDeliverPostsThenUpdates(t *testing.T) {
	si := &standIn{}
	srv := httptest.NewServer(si)
	defer srv.Close()
	s, err := New(Options{APIURL: srv.URL + "/api", Token: "xoxb-test", Channel: "C0OPS", Interactive: true,
		ChatApproval: func(r approval.Request) bool { return r.Rule == "writes" }})
	if err != nil {
		t.Fatal(err)
	}
	r := pending()
	ref, err := s.Deliver(t.Context(), notify.Message{Request: r, Event: approval.Event{Type: approval.EventRequested}})
	if err != nil {
		t.Fatal(err)
	}
	if ref != `{"channel":"C0OPS","ts":"1700000000.000001"}` {
		t.Errorf("ref = %s", ref)
	}
	r.State, r.DecidedBy = approval.StateApproved, "bob"
	ref2, err := s.Deliver(t.Context(), notify.Message{Request: r, Event: approval.Event{Type: approval.EventApproved}, Ref: ref})
	if err != nil || ref2 != ref {
		t.Fatalf("update = %q, %v; want the same ref", ref2, err)
	}
	calls := si.got()
	if len(calls) != 2 || calls[0].Method != "chat.postMessage" || calls[1].Method != "chat.update" {
		t.Fatalf("calls = %+v, want postMessage then update", calls)
	}
	if calls[0].Auth != "Bearer xoxb-test" || calls[0].Body["channel"] != "C0OPS" {
		t.Errorf("postMessage auth %q channel %v", calls[0].Auth, calls[0].Body["channel"])
	}
	if calls[1].Body["channel"] != "C0OPS" || calls[1].Body["ts"] != "1700000000.000001" || !strings.HasPrefix(calls[1].Body["text"].(string), "Approved by bob") {
		t.Errorf("update body = %v", calls[1].Body)
	}
	if !strings.Contains(mustJSON(t, calls[0].Body["blocks"]), ActionApprove) || strings.Contains(mustJSON(t, calls[1].Body["blocks"]), ActionApprove) {
		t.Errorf("buttons: want them on the pending message only")
	}

	// A message that is gone is posted again; other errors are errors.
	si.answer = func(method string, _ map[string]any) (int, string) {
		if method == "chat.update" {
			return http.StatusOK, `{"ok":false,"error":"message_not_found"}`
		}
		return 0, ""
	}
	ref3, err := s.Deliver(t.Context(), notify.Message{Request: r, Ref: ref})
	if err != nil || ref3 == ref || ref3 == "" {
		t.Errorf("update of a deleted message = %q, %v; want a new message's ref", ref3, err)
	}
	si.answer = func(string, map[string]any) (int, string) {
		return http.StatusOK, `{"ok":false,"error":"channel_not_found"}`
	}
	if _, err := s.Deliver(t.Context(), notify.Message{Request: r}); err == nil || err.Error() != "slack: chat.postMessage: channel_not_found" {
		t.Errorf("ok false = %v", err)
	}
	si.answer = func(string, map[string]any) (int, string) { return http.StatusTooManyRequests, "" }
	_, err = s.Deliver(t.Context(), notify.Message{Request: r})
	if d, ok := notify.RetryAfterOf(err); !ok || d != 7*time.Second {
		t.Errorf("429 = %v (wait %v %v), want a 7s wait", err, d, ok)
	}
	si.answer = func(string, map[string]any) (int, string) {
		return http.StatusOK, `{"ok":false,"error":"<script>\nfake log line"}`
	}
	if _, err := s.Deliver(t.Context(), notify.Message{Request: r}); err == nil || strings.ContainsAny(err.Error(), "<\n") {
		t.Errorf("an odd error code reaches the error: %v", err)
	}
}

func TestDeliverIncomingWebhook(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	s, err := New(Options{WebhookURL: srv.URL + "/services/T0/B0/s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	r := pending()
	for _, st := range []approval.State{approval.StatePending, approval.StateApproved} {
		r.State = st
		if ref, err := s.Deliver(t.Context(), notify.Message{Request: r, Ref: "ignored"}); err != nil || ref != "" {
			t.Fatalf("Deliver = %q, %v", ref, err)
		}
	}
	if len(bodies) != 2 || !strings.HasPrefix(bodies[1]["text"].(string), "Approved by") {
		t.Errorf("incoming webhook got %v, want two messages, the second the decision", bodies)
	}
	srv.Close()
	if _, err := s.Deliver(t.Context(), notify.Message{Request: r}); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Deliver to a closed server = %v, want an error without the URL", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewRefuses(t *testing.T) {
	for _, o := range []Options{
		{}, {Token: "x"}, {Token: "x", Channel: "C", WebhookURL: "https://hooks/s3cr3t"},
		{WebhookURL: "ftp://hooks/s3cr3t"}, {Token: "x", Channel: "C", APIURL: "not a url s3cr3t"},
	} {
		if _, err := New(o); err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("New(%+v) = %v", o, err)
		}
	}
}
