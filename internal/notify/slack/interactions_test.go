package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

const signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// world is the interaction endpoint over the real gate and a SQLite store.
type world struct {
	db    *sqlstore.DB
	h     *Interactions
	now   time.Time
	notes chan string // feedback shown to users
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, nil)
}

// newWorldWith is newWorld whose Reviewer is wrap(the gate) when wrap is
// not nil.
func newWorldWith(t *testing.T, wrap func(*sqlstore.DB, Reviewer) Reviewer) *world {
	t.Helper()
	w := &world{db: sqlitetest.Open(t), now: time.Now().UTC().Truncate(time.Second), notes: make(chan string, 100)}
	pol := &policy.Policy{Default: policy.Deny, Approval: policy.Approval{Timeout: time.Hour, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Hour},
		Rules: []policy.Rule{
			{Name: "writes", Server: "fs", Effect: policy.Approve, ChatApproval: true},
			{Name: "payments", Server: "pay", Effect: policy.Approve},
		}}
	holder := policy.NewHolder(pol)
	g := gate.New(w.db, holder, &gate.Options{Now: func() time.Time { return w.now }})
	var rv Reviewer = g
	if wrap != nil {
		rv = wrap(w.db, g)
	}
	human := func(id, tenant string, groups ...string) approval.Principal {
		return approval.Principal{ID: id, Kind: "human", Tenant: tenant, Groups: groups}
	}
	h, err := NewInteractions(InteractionOptions{
		Apps: []App{{SigningSecret: "other-app"}, {SigningSecret: signingSecret, Feedback: func(_ context.Context, channel, user, text string) error {
			w.notes <- channel + "/" + user + ": " + text
			return nil
		}}},
		Approvers: map[string]Approver{
			"U0ALICE": {Principal: human("alice", ""), Roles: []string{"approver"}},
			"U0BOB":   {Principal: human("bob", "", "ops"), Roles: []string{"approver"}},
			"U0VIC":   {Principal: human("victor", ""), Roles: []string{"viewer"}},
			"U0TED":   {Principal: human("ted", "other-tenant"), Roles: []string{"approver"}},
		},
		ChatApproval: func(r approval.Request) bool { return holder.Load().ChatApproval(r.Rule) },
		Reviewer:     rv,
		Now:          func() time.Time { return w.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

var requestSeq int

// request stores a pending request under rule.
func (w *world) request(t *testing.T, rule, server string, edit func(*approval.Request)) approval.Request {
	t.Helper()
	requestSeq++
	r := approval.Request{
		ID: approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", requestSeq)), State: approval.StatePending,
		Server: server, Tool: "write_file", Arguments: []byte(`{"path":"a"}`), ArgumentsHash: "sha256:" + strings.Repeat("cd", 32),
		Rule: rule, Mode: "hold", RequestedBy: "agent-1", OnBehalfOf: "alice", CreatedAt: w.now, ExpiresAt: w.now.Add(time.Hour),
		RequiredApprovals: 1, ValidFor: time.Hour,
	}
	if edit != nil {
		edit(&r)
	}
	if err := w.db.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// click is one signed button click; zero fields take valid values.
type click struct {
	user, action, value string
	secret              string
	ts                  time.Time
	sig                 string // overrides the signature
	body                string // overrides the body
}

func (w *world) post(t *testing.T, c click) (int, string) {
	t.Helper()
	if c.secret == "" {
		c.secret = signingSecret
	}
	if c.ts.IsZero() {
		c.ts = w.now
	}
	if c.action == "" {
		c.action = ActionApprove
	}
	p, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]string{"id": c.user, "team_id": "T0"}, "channel": map[string]string{"id": "C0OPS"},
		"actions": []map[string]string{{"action_id": c.action, "value": c.value, "block_id": "b"}},
	})
	body := c.body
	if body == "" {
		body = url.Values{"payload": {string(p)}}.Encode()
	}
	ts := strconv.FormatInt(c.ts.Unix(), 10)
	sig := c.sig
	if sig == "" {
		sig = Sign(c.secret, ts, []byte(body))
	}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", sig)
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func (w *world) state(t *testing.T, id approval.ID) approval.Request {
	t.Helper()
	r, err := w.db.GetRequest(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func value(r approval.Request) string { return string(r.ID) + " " + r.ArgumentsHash }

func TestInteractionDecides(t *testing.T) {
	w := newWorld(t)
	r := w.request(t, "writes", "fs", func(r *approval.Request) { r.OnBehalfOf = "" })
	status, body := w.post(t, click{user: "U0ALICE", value: value(r)})
	if status != http.StatusOK {
		t.Fatalf("approve = %d %s", status, body)
	}
	got := w.state(t, r.ID)
	if got.State != approval.StateApproved || got.DecidedBy != "alice" {
		t.Errorf("after the click: %s by %q, want approved by alice", got.State, got.DecidedBy)
	}
	// The same click again (a retry, or a replay inside the window)
	// changes nothing and is not an error.
	if status, body := w.post(t, click{user: "U0ALICE", value: value(r)}); status != http.StatusOK {
		t.Errorf("the same click again = %d %s", status, body)
	}
	d := w.request(t, "writes", "fs", func(r *approval.Request) { r.OnBehalfOf = "" })
	if status, body := w.post(t, click{user: "U0BOB", action: ActionDeny, value: value(d)}); status != http.StatusOK {
		t.Fatalf("deny = %d %s", status, body)
	}
	if got := w.state(t, d.ID); got.State != approval.StateDenied || got.Reason != "denied from Slack by bob" {
		t.Errorf("after deny: %s %q", got.State, got.Reason)
	}
}

func TestInteractionQuorum(t *testing.T) {
	w := newWorld(t)
	r := w.request(t, "writes", "fs", func(r *approval.Request) { r.OnBehalfOf, r.RequiredApprovals = "", 2 })
	if status, body := w.post(t, click{user: "U0ALICE", value: value(r)}); status != http.StatusOK {
		t.Fatalf("first approval = %d %s", status, body)
	}
	if got := w.state(t, r.ID); got.State != approval.StatePending || len(got.Reviews) != 1 {
		t.Fatalf("after one of two: %s with %d reviews", got.State, len(got.Reviews))
	}
	if status, body := w.post(t, click{user: "U0BOB", value: value(r)}); status != http.StatusOK {
		t.Fatalf("second approval = %d %s", status, body)
	}
	if got := w.state(t, r.ID); got.State != approval.StateApproved {
		t.Errorf("after two of two: %s", got.State)
	}
	for _, want := range []string{
		"C0OPS/U0ALICE: Your approval of fs · write_file was recorded; the request is pending (1 of 2 approvals).",
		"C0OPS/U0BOB: Your approval of fs · write_file was recorded; the request is approved (2 of 2 approvals); the call runs when its holder re-checks it against the policy in force and its approval quorum, if its caller is still waiting or re-sends it.",
	} {
		select {
		case got := <-w.notes:
			if got != want {
				t.Errorf("feedback = %q, want %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no feedback %q", want)
		}
	}
}

// TestInteractionRefusals: each refusal decides nothing.
func TestInteractionRefusals(t *testing.T) {
	w := newWorld(t)
	cases := []struct {
		name   string
		rule   string
		server string
		edit   func(*approval.Request)
		click  func(r approval.Request) click
		status int
		code   string
	}{
		{"bad signature", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r), sig: "v0=" + strings.Repeat("0", 64)}
		}, 401, "bad_signature"},
		{"signed with an unknown secret", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r), secret: "not-the-secret"}
		}, 401, "bad_signature"},
		{"no signature", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r), sig: "-"}
		}, 401, "bad_signature"},
		{"replayed after 5 minutes", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r), ts: w.now.Add(-5*time.Minute - time.Second)}
		}, 401, "stale"},
		{"from the future", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r), ts: w.now.Add(6 * time.Minute)}
		}, 401, "stale"},
		{"unmapped Slack user", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0MALLORY", value: value(r)}
		}, 403, "unknown_user"},
		{"rule without chat_approval", "payments", "pay", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r)}
		}, 403, "chat_approval_off"},
		{"session require_approval", "session require_approval", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r)}
		}, 403, "chat_approval_off"},
		{"policy change", "writes", "", func(r *approval.Request) { r.Kind, r.Target, r.Tool = approval.KindPolicyChange, "deployment", "" }, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r)}
		}, 403, "chat_approval_off"},
		{"self-review (the agent acts for alice)", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0ALICE", value: value(r)}
		}, 403, "self_review"},
		{"not among the rule's approvers", "writes", "fs", func(r *approval.Request) { r.Approvers = []string{"group:sec"} }, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r)}
		}, 403, "not_eligible"},
		{"viewer role", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0VIC", value: value(r)}
		}, 403, "forbidden"},
		{"another tenant's request", "writes", "fs", func(r *approval.Request) { r.Tenant = "acme" }, func(r approval.Request) click {
			return click{user: "U0TED", value: value(r)}
		}, 404, "not_found"},
		{"arguments changed since the message", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: string(r.ID) + " sha256:" + strings.Repeat("ef", 32)}
		}, 409, "hash_mismatch"},
		{"expired", "writes", "fs", func(r *approval.Request) { r.CreatedAt, r.ExpiresAt = w.now.Add(-2*time.Hour), w.now.Add(-time.Hour) }, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r)}
		}, 409, "expired"},
		{"not a toolgate button", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", value: value(r), action: "other_app_button"}
		}, 400, "invalid_request"},
		{"no payload", "writes", "fs", nil, func(r approval.Request) click {
			return click{user: "U0BOB", body: "text=hi"}
		}, 400, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := w.request(t, c.rule, c.server, c.edit)
			status, body := w.post(t, c.click(r))
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal([]byte(body), &e)
			if status != c.status || e.Error.Code != c.code {
				t.Errorf("answer = %d %s, want %d %s", status, body, c.status, c.code)
			}
			got := w.state(t, r.ID)
			if got.State != approval.StatePending || len(got.Reviews) != 0 {
				t.Errorf("the request is %s with %d reviews; want pending, untouched", got.State, len(got.Reviews))
			}
		})
	}
	if status, _ := w.post(t, click{user: "U0BOB", value: "01900000-0000-7000-8000-0000000fffff sha256:" + strings.Repeat("00", 32)}); status != http.StatusNotFound {
		t.Errorf("unknown approval = %d, want 404", status)
	}
}

func TestVerifySignature(t *testing.T) {
	// Slack's documented example request.
	body := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	const ts, sig = "1531420618", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	at := time.Unix(1531420618, 0)
	cases := []struct {
		name    string
		ts, sig string
		body    []byte
		now     time.Time
		want    error
	}{
		{"Slack's example", ts, sig, body, at, nil},
		{"4 minutes later", ts, sig, body, at.Add(4 * time.Minute), nil},
		{"replayed 5m1s later", ts, sig, body, at.Add(5*time.Minute + time.Second), ErrStale},
		{"body changed", ts, sig, append([]byte("x"), body...), at, ErrBadSignature},
		{"timestamp changed", "1531420619", sig, body, at, ErrBadSignature},
		{"no v0= prefix", ts, strings.TrimPrefix(sig, "v0="), body, at, ErrBadSignature},
		{"not hex", ts, "v0=zz", body, at, ErrBadSignature},
		{"no timestamp", "", sig, body, at, ErrBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := VerifySignature(signingSecret, c.ts, c.sig, c.body, c.now); !errors.Is(err, c.want) {
				t.Errorf("VerifySignature = %v, want %v", err, c.want)
			}
		})
	}
	if got := Sign(signingSecret, ts, body); got != sig {
		t.Errorf("Sign = %s, want Slack's %s", got, sig)
	}
}

// TestLongArgumentsApprovedOnlyWhereSeen: a message shows one line of the
// arguments, clipped at maxSummary. An agent that pads the start of its
// arguments could have the part that matters clipped away, and a click on
// Approve would then decide arguments nobody in Slack saw. Such a message
// offers Deny and the inbox, says why Approve is missing, and an approve
// click (a message posted before, a forged button) is refused with
// nothing decided; a deny still works.
func TestLongArgumentsApprovedOnlyWhereSeen(t *testing.T) {
	w := newWorld(t)
	long := []byte(`{"note":"` + strings.Repeat("routine cleanup ", 30) + `","path":"/etc/passwd"}`)
	r := w.request(t, "writes", "fs", func(r *approval.Request) { r.OnBehalfOf, r.Arguments = "", long })
	m := render(r, renderOptions{publicURL: "https://tg.example", buttons: true})
	got := buttons(m)
	if _, ok := got[ActionApprove]; ok || got[ActionDeny] == "" || got["toolgate_open"] == "" {
		t.Errorf("buttons = %v, want Deny and the inbox link, no Approve", got)
	}
	plains, mds := texts(t, m)
	if all := strings.Join(append(plains, mds...), "\n"); strings.Contains(all, "/etc/passwd") || !strings.Contains(all, "too long to show here") {
		t.Errorf("message texts:\n%s\nwant the clipped arguments and a note on why Approve is missing", all)
	}
	status, body := w.post(t, click{user: "U0ALICE", value: value(r)})
	if status != http.StatusForbidden || !strings.Contains(body, "arguments_not_shown") {
		t.Errorf("approve click = %d %s, want 403 arguments_not_shown", status, body)
	}
	if got := w.state(t, r.ID); got.State != approval.StatePending || len(got.Reviews) != 0 {
		t.Fatalf("after the refused click: %s with %d reviews, want pending with none", got.State, len(got.Reviews))
	}
	if status, body := w.post(t, click{user: "U0BOB", action: ActionDeny, value: value(r)}); status != http.StatusOK {
		t.Fatalf("deny = %d %s", status, body)
	}
	if got := w.state(t, r.ID); got.State != approval.StateDenied {
		t.Errorf("after deny: %s, want denied", got.State)
	}
	// Arguments that fit keep their Approve button.
	short := w.request(t, "writes", "fs", func(r *approval.Request) { r.OnBehalfOf = "" })
	if _, ok := buttons(render(short, renderOptions{buttons: true}))[ActionApprove]; !ok {
		t.Error("a message whose arguments fit has no Approve button")
	}
}
