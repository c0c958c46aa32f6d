package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/notify/slack"
)

// slackSecret is the Slack app's signing secret, slackToken its bot token
// (SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN in the gateway's environment).
const (
	slackSecret = "e2e-slack-signing-secret-d41c"
	slackToken  = "xoxb-e2e-bot-token"
)

// slackStandIn is a local stand-in for Slack's Web API (Slack itself cannot
// run here): chat.postMessage answers a new ts, chat.update and
// chat.postEphemeral answer ok; every call is recorded.
type slackStandIn struct {
	URL string

	mu      sync.Mutex
	calls   []slackCall
	ts      int
	changed chan struct{}
}

type slackCall struct {
	Method string
	Auth   string
	Body   map[string]any
	Raw    string
}

func startSlackStandIn(t *testing.T) *slackStandIn {
	t.Helper()
	s := &slackStandIn{changed: make(chan struct{})}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/api"
	return s
}

func (s *slackStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, slackCall{strings.TrimPrefix(r.URL.Path, "/api/"), r.Header.Get("Authorization"), body, string(raw)})
	close(s.changed)
	s.changed = make(chan struct{})
	answer := map[string]any{"ok": true}
	switch strings.TrimPrefix(r.URL.Path, "/api/") {
	case "chat.postMessage":
		s.ts++
		answer["channel"], answer["ts"] = body["channel"], fmt.Sprintf("1700000000.%06d", s.ts)
	case "chat.update":
		answer["channel"], answer["ts"] = body["channel"], body["ts"]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// waitCall waits for the first call of method, after the first skip such
// calls, whose raw body contains every one of parts.
func (s *slackStandIn) waitCall(t *testing.T, method string, parts ...string) slackCall {
	t.Helper()
	deadline := time.After(waitFor(t))
	for {
		s.mu.Lock()
		calls, changed := append([]slackCall(nil), s.calls...), s.changed
		s.mu.Unlock()
		for _, c := range calls {
			if c.Method != method {
				continue
			}
			all := true
			for _, p := range parts {
				all = all && strings.Contains(c.Raw, p)
			}
			if all {
				return c
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s call holding %q after %v; calls: %d", method, parts, waitFor(t), len(calls))
		}
	}
}

// slackConfig is teamConfig (agent-1 acts for nobody) with carol mapped
// to the Slack user U0CAROL, the inbox at https://toolgate.example, one
// Slack channel on the stand-in, and notifyPolicy.
func slackConfig(db, record, standIn string) string {
	cfg := teamConfig(db, `
approvals:
  public_url: https://toolgate.example
notify:
  poll: 100ms
  backoff: 100ms
  channels:
    - name: slack
      type: slack
      token_env: SLACK_BOT_TOKEN
      channel: C0OPS
      secret_env: SLACK_SIGNING_SECRET
      api_url: `+q(standIn)+`
      events: [requested, decided, expired, cancelled]
`+upstreamServer(record)+notifyPolicy)
	return strings.Replace(cfg, "token_env: E2E_CAROL_TOKEN\n", "token_env: E2E_CAROL_TOKEN\n    slack_user_id: U0CAROL\n", 1)
}

// clickSlack posts a button click to the gateway's interaction endpoint as
// Slack would: user clicks action on the button carrying value, signed
// with secret at ts. It returns the status and body.
func clickSlack(t *testing.T, admin, user, action, value, secret string, ts time.Time) (int, string) {
	t.Helper()
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]string{"id": user}, "channel": map[string]string{"id": "C0OPS"},
		"actions": []map[string]string{{"action_id": action, "value": value}},
	})
	body := url.Values{"payload": {string(p)}}.Encode()
	sec := strconv.FormatInt(ts.Unix(), 10)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, admin+"/v1/slack/interactions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", sec)
	req.Header.Set("X-Slack-Signature", slack.Sign(secret, sec, []byte(body)))
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// buttonValue returns the value of the approve button in a posted
// message's blocks, or "".
func buttonValue(c slackCall) string {
	blocks, _ := c.Body["blocks"].([]any)
	for _, b := range blocks {
		bm, _ := b.(map[string]any)
		els, _ := bm["elements"].([]any)
		for _, e := range els {
			em, _ := e.(map[string]any)
			if em["action_id"] == slack.ActionApprove {
				v, _ := em["value"].(string)
				return v
			}
		}
	}
	return ""
}

// TestSlack runs the gateway against a Slack stand-in: a held call's
// message is posted and updated in place when decided; a click decides
// only when signed, fresh, by a mapped approver, on a rule with
// chat_approval.
func TestSlack(t *testing.T) {
	si := startSlackStandIn(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	env := map[string]string{"SLACK_BOT_TOKEN": slackToken, "SLACK_SIGNING_SECRET": slackSecret}
	maps.Copy(env, teamEnv)
	cfg := slackConfig(filepath.Join(dir, "toolgate.db"), record, si.URL)
	if !strings.Contains(cfg, "slack_user_id: U0CAROL") {
		t.Fatal("carol is not mapped to U0CAROL")
	}
	g := startGateway(t, cfg, env)
	cs := g.connect(t, nil, nil)

	t.Run("posted, then updated on decision", func(t *testing.T) {
		args := `{"n":1,"note":"<!channel> look"}`
		ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
		p := awaitPendingArgs(t, g.Admin, args)
		post := si.waitCall(t, "chat.postMessage", p.ID)
		if post.Auth != "Bearer "+slackToken || post.Body["channel"] != "C0OPS" {
			t.Errorf("postMessage auth %q channel %v", post.Auth, post.Body["channel"])
		}
		for _, want := range []string{
			"Approval needed: t · echo_raw",                 // summary
			`\"note\":\"\u003c!channel\u003e look\"`,        // the argument summary (plain text, JSON-escaped on the wire)
			`*Requested by*\n` + agentID,                    // requester
			`*Rule*\necho needs approval`,                   // rule
			`*Expires*\n\u003c!date^`,                       // expiry
			"https://toolgate.example/ui/approvals/" + p.ID, // inbox link
		} {
			if !strings.Contains(post.Raw, want) {
				t.Errorf("the posted message lacks %q:\n%s", want, post.Raw)
			}
		}
		if v := buttonValue(post); v != p.ID+" "+p.ArgumentsHash {
			t.Errorf("approve button value %q, want the id and hash", v)
		}
		mustReview(t, g.Admin, p.ID, "approve", "")
		mustOK(t, await(t, ch))
		upd := si.waitCall(t, "chat.update", p.ID, "Approved by "+approverID)
		if upd.Body["channel"] != "C0OPS" || upd.Body["ts"] != "1700000000.000001" {
			t.Errorf("update of channel %v ts %v, want the posted message's", upd.Body["channel"], upd.Body["ts"])
		}
		if buttonValue(upd) != "" {
			t.Errorf("the updated message still has buttons")
		}
	})

	t.Run("clicks", func(t *testing.T) {
		args := `{"n":2}`
		ch := callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
		p := awaitPendingArgs(t, g.Admin, args)
		value := buttonValue(si.waitCall(t, "chat.postMessage", p.ID))
		if value == "" {
			t.Fatal("no approve button on a chat_approval rule's message")
		}
		now := time.Now()
		refused := []struct {
			name         string
			user, secret string
			ts           time.Time
			status       int
		}{
			{"bad signature", "U0CAROL", "not-the-signing-secret", now, http.StatusUnauthorized},
			{"replayed after more than 5 minutes", "U0CAROL", slackSecret, now.Add(-5*time.Minute - 10*time.Second), http.StatusUnauthorized},
			{"unmapped Slack user", "U0MALLORY", slackSecret, now, http.StatusForbidden},
		}
		for _, c := range refused {
			status, body := clickSlack(t, g.Admin, c.user, slack.ActionApprove, value, c.secret, c.ts)
			if status != c.status {
				t.Errorf("%s: %d %s, want %d", c.name, status, body, c.status)
			}
			if a := fetchApproval(t, g.Admin, p.ID); a.State != "pending" || len(a.Reviews) != 0 {
				t.Fatalf("%s decided something: %s with %d reviews", c.name, a.State, len(a.Reviews))
			}
		}
		status, body := clickSlack(t, g.Admin, "U0CAROL", slack.ActionApprove, value, slackSecret, time.Now())
		if status != http.StatusOK {
			t.Fatalf("carol's click: %d %s", status, body)
		}
		mustOK(t, await(t, ch))
		if a := fetchApproval(t, g.Admin, p.ID); a.State != "consumed" || a.DecidedBy != carolID {
			t.Errorf("after carol's click: %s by %q, want consumed, decided by carol", a.State, a.DecidedBy)
		}
		if got := countLines(readRecord(t, record), "echo_raw "+args); got != 1 {
			t.Errorf("the upstream ran %d times, want 1", got)
		}
		si.waitCall(t, "chat.update", p.ID, "Approved by "+carolID)
		si.waitCall(t, "chat.postEphemeral", `"user":"U0CAROL"`, "recorded")
		m := scrapeMetrics(t, g.Admin)
		for series, want := range map[string]float64{
			`toolgate_slack_interactions_total{outcome="decided"}`:       1,
			`toolgate_slack_interactions_total{outcome="refused"}`:       1,
			`toolgate_slack_interactions_total{outcome="bad_signature"}`: 1,
			`toolgate_slack_interactions_total{outcome="stale"}`:         1,
		} {
			if m[series] != want {
				t.Errorf("%s = %v, want %v", series, m[series], want)
			}
		}
	})

	t.Run("a rule without chat_approval refuses clicks", func(t *testing.T) {
		args := `{"n":3}`
		ch := callAsync(t.Context(), cs, toolCall("t__progress", args))
		p := awaitPendingArgs(t, g.Admin, args)
		post := si.waitCall(t, "chat.postMessage", p.ID)
		if v := buttonValue(post); v != "" {
			t.Errorf("buttons on a rule without chat_approval: %q", v)
		}
		// A forged button (validly signed: the app is the same) decides
		// nothing.
		status, body := clickSlack(t, g.Admin, "U0CAROL", slack.ActionApprove, p.ID+" "+p.ArgumentsHash, slackSecret, time.Now())
		if status != http.StatusForbidden || !strings.Contains(body, "chat_approval") {
			t.Errorf("click on a rule without chat_approval: %d %s, want 403", status, body)
		}
		if a := fetchApproval(t, g.Admin, p.ID); a.State != "pending" || len(a.Reviews) != 0 {
			t.Errorf("the click decided something: %s with %d reviews", a.State, len(a.Reviews))
		}
		postVerdict(t, g.Admin, approverToken, p.ID, "deny", map[string]string{"reason": "not from chat"})
		mustIsError(t, await(t, ch))
		si.waitCall(t, "chat.update", p.ID, "Denied by "+approverID)
	})
}
