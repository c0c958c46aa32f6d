package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/api"
	"toolgate/internal/api/apitest"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
	"toolgate/internal/store"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	idA     = "01900000-0000-7000-8000-00000000000a" // pending, 1 approval
	idB     = "01900000-0000-7000-8000-00000000000b" // pending, 2 approvals, group:ops
	idC     = "01900000-0000-7000-8000-00000000000c" // denied
	idU     = "0abcdef0-1111-7000-8000-000000000001" // pending, unique prefix 0abcde
	idHide  = "0fedcba0-2222-7000-8000-000000000002" // pending, C15 arguments
	idS     = "01900000-0000-7000-8000-00000abcdef0" // pending (added by TestShortIDSuffix): ends with idU's start
	hashA   = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB   = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	tokAlic = "alice-tok"
)

func authenticate(token string) (approval.Principal, []string, bool) {
	switch token {
	case "alice-tok":
		return approval.Principal{ID: "alice", Kind: "human", Groups: []string{"ops"}}, []string{api.RoleApprover}, true
	case "bob-tok":
		return approval.Principal{ID: "bob", Kind: "human"}, []string{api.RoleApprover}, true
	case "viewer-tok":
		return approval.Principal{ID: "vera", Kind: "human"}, []string{api.RoleViewer}, true
	case "agent-tok":
		return approval.Principal{ID: "desktop", Kind: "human"}, []string{api.RoleApprover}, true
	}
	return approval.Principal{}, nil, false
}

func request(id string) approval.Request {
	return approval.Request{
		ID:                approval.ID(id),
		State:             approval.StatePending,
		Server:            "pay",
		Tool:              "transfer",
		Arguments:         json.RawMessage(`{"to":"acct-1","amount":5}`),
		ArgumentsHash:     hashA,
		DisplayWarnings:   []string{},
		Rule:              "payments",
		Mode:              "hold",
		RequestedBy:       "desktop",
		OnBehalfOf:        "carol",
		CreatedAt:         t0.Add(-time.Minute),
		ExpiresAt:         t0.Add(5 * time.Minute),
		RequiredApprovals: 1,
	}
}

func fixtures() []approval.Request {
	b := request(idB)
	b.Tool = "refund"
	b.RequiredApprovals = 2
	b.Approvers = []string{"group:ops"}
	b.OnBehalfOf = ""
	b.ExpiresAt = t0.Add(90 * time.Second)
	c := request(idC)
	c.State = approval.StateDenied
	c.Reviews = []approval.Review{{By: "bob", Verdict: approval.VerdictDeny, Reason: "too much", At: t0.Add(-10 * time.Second)}}
	c.DecidedBy, c.DecidedAt, c.Reason = "bob", t0.Add(-10*time.Second), "too much"
	u := request(idU)
	u.Server, u.Tool = "fs", "write_file"
	h := request(idHide)
	h.Server, h.Tool = "shell", "run"
	// The display copy as approval.Display makes it: escapes, not raw characters.
	h.Arguments = json.RawMessage(`{"command":"rm -rf ~ \u001B[2K\u001B[1Gls -la","path":"/srv/invoice\u202Efdp.exe"}`)
	h.DisplayWarnings = []string{"$.command: contains U+001B ESCAPE", "$.path: contains U+202E RIGHT-TO-LEFT OVERRIDE"}
	return []approval.Request{request(idA), b, c, u, h}
}

type env struct {
	fake *apitest.Approvals
	addr string
	vars map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	fake := apitest.New(func() time.Time { return t0 })
	for _, r := range fixtures() {
		fake.Add(r)
	}
	srv := httptest.NewServer(api.New(fake, authenticate, &api.Options{Now: func() time.Time { return t0 }}))
	t.Cleanup(srv.Close)
	return &env{fake: fake, addr: srv.URL, vars: map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: tokAlic}}
}

func (e *env) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Run(t.Context(), args, &out, &errb, func(k string) string { return e.vars[k] })
	return code, out.String(), errb.String()
}

func (e *env) state(t *testing.T, id string) approval.Request {
	t.Helper()
	r, err := e.fake.Get(t.Context(), approval.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestList(t *testing.T) {
	e := newEnv(t)
	code, out, errs := e.run(t, "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// The arguments column tells apart calls of one tool (which invoice?):
	// the display copy on one line, escaped as show escapes it, cut with
	// "…", and marked "!" when show has display warnings. Newest first, as
	// the web inbox.
	// A request needing two approvals shows its progress (newuser49).
	want := `ID                                    STATE        SERVER  TOOL        REQUESTED BY       EXPIRES IN  ARGUMENTS
0fedcba0-2222-7000-8000-000000000002  pending      shell   run         desktop for carol  5m0s        ! {"command":"rm -rf ~ \u001B[2K\u001B[1Gls -la","path":"/srv…
0abcdef0-1111-7000-8000-000000000001  pending      fs      write_file  desktop for carol  5m0s        {"to":"acct-1","amount":5}
01900000-0000-7000-8000-00000000000b  pending 0/2  pay     refund      desktop            1m30s       {"to":"acct-1","amount":5}
01900000-0000-7000-8000-00000000000a  pending      pay     transfer    desktop for carol  5m0s        {"to":"acct-1","amount":5}
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("list output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Filter{{State: approval.StatePending, Limit: 50, Descending: true}}, e.fake.Filters()); diff != "" {
		t.Errorf("filters (-want +got):\n%s", diff)
	}
}

func TestListFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want store.Filter
	}{
		{name: "all", args: []string{"list", "--state", "all"}, want: store.Filter{Limit: 50, Descending: true}},
		{name: "denied with limit", args: []string{"list", "--state=denied", "--limit", "2"}, want: store.Filter{State: approval.StateDenied, Limit: 2, Descending: true}},
		{name: "command flags before the command", args: []string{"--limit", "3", "list", "--cursor", idA}, want: store.Filter{State: approval.StatePending, Limit: 3, Cursor: idA, Descending: true}},
		{name: "oldest first", args: []string{"list", "--oldest"}, want: store.Filter{State: approval.StatePending, Limit: 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if code, _, errs := e.run(t, tt.args...); code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if diff := cmp.Diff([]store.Filter{tt.want}, e.fake.Filters()); diff != "" {
				t.Errorf("filters (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListPaginationHint(t *testing.T) {
	e := newEnv(t)
	code, out, _ := e.run(t, "list", "--limit", "2")
	if code != 0 || !strings.Contains(out, "\nmore: toolgate approvals list --state pending --limit 2 --cursor 0abcdef0-1111-7000-8000-000000000001\n") || strings.Contains(out, idA) {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	// The hint keeps --oldest, so the next page follows the same order.
	code, out, _ = e.run(t, "list", "--limit", "2", "--oldest")
	if code != 0 || !strings.Contains(out, "\nmore: toolgate approvals list --state pending --limit 2 --oldest --cursor "+idB+"\n") || strings.Contains(out, idU) {
		t.Errorf("--oldest: exit %d, output:\n%s", code, out)
	}
}

func TestListEmpty(t *testing.T) {
	e := newEnv(t)
	code, out, _ := e.run(t, "list", "--state", "cancelled")
	if code != 0 || out != "no approvals (state: cancelled)\n" {
		t.Errorf("exit %d, output %q", code, out)
	}
}

func TestListJSON(t *testing.T) {
	e := newEnv(t)
	code, out, _ := e.run(t, "list", "--json", "--state", "denied")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var l api.List
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("--json output is not the API's JSON: %v\n%s", err, out)
	}
	if len(l.Approvals) != 1 || l.Approvals[0].ID != idC || l.Approvals[0].Reason != "too much" {
		t.Errorf("got %+v", l)
	}
}

func TestShow(t *testing.T) {
	e := newEnv(t)
	code, out, errs := e.run(t, "show", idC)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `Approval:           01900000-0000-7000-8000-00000000000c
State:              denied
Server:             pay
Tool:               transfer
Rule:               payments (the first matching approve rule; the timeout, approvals and valid_for are the strictest of all the matching approve rules: policy explain names them)
Requested by:       desktop
On behalf of:       carol
Mode:               hold
Created:            2026-01-02T03:03:05Z
Expires:            2026-01-02T03:09:05Z
Required approvals: 1 (0 so far)
Approvers:          anyone with the approver role; never carol, whom it acts for
Arguments hash:     ` + hashA + `
Arguments:
  {
    "to": "acct-1",
    "amount": 5
  }
Reviews:
  - bob deny at 2026-01-02T03:03:55Z: too much
Decision:           denied by bob at 2026-01-02T03:03:55Z
Reason:             too much
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("show output (-want +got):\n%s", diff)
	}
}

func TestShowPending(t *testing.T) {
	e := newEnv(t)
	_, out, _ := e.run(t, "show", idB)
	for _, want := range []string{
		"Expires:            2026-01-02T03:05:35Z (in 1m30s)\n",
		"Required approvals: 2 (0 so far)\n",
		"Approvers:          group:ops\n",
		"Reviews:            none\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "WARNING") || strings.Contains(out, "Decision") {
		t.Errorf("unexpected section:\n%s", out)
	}
}

// Case C15: display warnings come first, and nothing hidden reaches the terminal.
func TestShowWarnings(t *testing.T) {
	e := newEnv(t)
	code, out, _ := e.run(t, "show", idHide)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.HasPrefix(out, "WARNING: ") {
		t.Fatalf("output does not start with the warning:\n%s", out)
	}
	warn, rest, _ := strings.Cut(out, "\n\n")
	for _, w := range []string{"$.command: contains U+001B ESCAPE", "$.path: contains U+202E RIGHT-TO-LEFT OVERRIDE"} {
		if !strings.Contains(warn, w) {
			t.Errorf("warning block lacks %q:\n%s", w, warn)
		}
	}
	for _, esc := range []string{`\u001B[2K`, `invoice\u202Efdp.exe`} {
		if !strings.Contains(rest, esc) {
			t.Errorf("arguments lack %s:\n%s", esc, rest)
		}
	}
	assertNoHidden(t, out)
}

// A server (or a stored value) that sends hidden characters raw still
// cannot make the CLI print them.
func TestShowEscapesRawHiddenCharacters(t *testing.T) {
	e := newEnv(t)
	r := request("0aaaaaa0-3333-7000-8000-000000000003")
	r.State = approval.StateDenied
	r.Arguments = json.RawMessage("{\"to\":\"acct\u200b-1\",\"cmd\":\"\\u001b[1G\"}")
	r.Reviews = []approval.Review{{By: "bob", Verdict: approval.VerdictDeny, Reason: "no\nState:              approved", At: t0}}
	r.DecidedBy, r.DecidedAt, r.Reason = "bob\u202e", t0, "no\nState:              approved"
	e.fake.Add(r)
	for _, args := range [][]string{{"show", string(r.ID)}, {"show", "--json", string(r.ID)}, {"list", "--state", "denied"}} {
		code, out, _ := e.run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		assertNoHidden(t, out)
		if args[1] == string(r.ID) {
			if !strings.HasPrefix(out, "WARNING: ") {
				t.Errorf("%v: no warning for escaped characters:\n%s", args, out)
			}
			if strings.Count(out, "\nState:") != 1 {
				t.Errorf("%v: a reason forged a line:\n%s", args, out)
			}
			if !strings.Contains(out, `acct\u200B-1`) {
				t.Errorf("%v: zero-width space not shown as an escape:\n%s", args, out)
			}
		}
	}
}

func assertNoHidden(t *testing.T, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && api.IsHidden(r) {
			t.Errorf("output contains raw %U:\n%s", r, out)
		}
	}
}

func TestReview(t *testing.T) {
	tests := []struct {
		name       string
		token      string
		args       []string
		id         string
		wantState  approval.State
		wantReason string
		wantOut    string
	}{
		{name: "approve", args: []string{"approve", idA}, id: idA, wantState: approval.StateApproved, wantOut: idA + ": approve recorded; now approved (1 of 1, decided by alice); the call runs when its holder re-checks it against the policy in force and its approval quorum, if its caller is still waiting or re-sends it; approvals show says what became of it\n"},
		{name: "flags after id", args: []string{"approve", idA, "--reason", "looks right"}, id: idA, wantState: approval.StateApproved, wantReason: "looks right"},
		{name: "flag with equals", args: []string{"approve", "--reason=ok then", idA}, id: idA, wantState: approval.StateApproved, wantReason: "ok then"},
		{name: "single dash flag", args: []string{"approve", idA, "-reason", "single"}, id: idA, wantState: approval.StateApproved, wantReason: "single"},
		{name: "reason that looks like a flag", args: []string{"deny", idA, "--reason", "--json"}, id: idA, wantState: approval.StateDenied, wantReason: "--json"},
		{name: "global flags before command", token: "-", args: []string{"--token", "bob-tok", "deny", idA, "--reason", "no"}, id: idA, wantState: approval.StateDenied, wantReason: "no", wantOut: idA + ": deny recorded; now denied (decided by bob)\n"},
		{name: "double dash", args: []string{"deny", "--reason", "no", "--", idA}, id: idA, wantState: approval.StateDenied, wantReason: "no"},
		{name: "upper-case id", args: []string{"approve", strings.ToUpper(idA)}, id: idA, wantState: approval.StateApproved},
		{name: "pinned hash", args: []string{"approve", idA, "--hash", hashA}, id: idA, wantState: approval.StateApproved},
		{name: "one of two", args: []string{"approve", idB}, id: idB, wantState: approval.StatePending, wantOut: idB + ": approve recorded; still pending, 1 of 2 approvals\n"},
		{name: "unique prefix", args: []string{"approve", "0abcde"}, id: idU, wantState: approval.StateApproved},
		{name: "longer prefix", args: []string{"deny", "0ABCDEF0-11", "--reason", "no"}, id: idU, wantState: approval.StateDenied, wantReason: "no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.token == "-" {
				delete(e.vars, cli.EnvToken)
			}
			code, out, errs := e.run(t, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if tt.wantOut != "" && out != tt.wantOut {
				t.Errorf("output = %q, want %q", out, tt.wantOut)
			}
			r := e.state(t, tt.id)
			if r.State != tt.wantState {
				t.Errorf("state = %s, want %s", r.State, tt.wantState)
			}
			if len(r.Reviews) != 1 || r.Reviews[0].Reason != tt.wantReason {
				t.Errorf("reviews = %+v, want one with reason %q", r.Reviews, tt.wantReason)
			}
		})
	}
}

func TestReviewJSON(t *testing.T) {
	e := newEnv(t)
	code, out, _ := e.run(t, "approve", idA, "--json")
	var a api.Approval
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil || a.State != "approved" || a.DecidedBy != "alice" {
		t.Errorf("exit %d, output %s", code, out)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name     string
		vars     map[string]string // overrides; "" deletes
		args     []string
		wantCode int
		wantErr  []string // substrings of stderr
	}{
		{name: "no command", args: nil, wantCode: 2, wantErr: []string{"missing command"}},
		{name: "only flags", args: []string{"--json"}, wantCode: 2, wantErr: []string{"missing command"}},
		{name: "unknown command", args: []string{"purge"}, wantCode: 2, wantErr: []string{`unknown command "purge"`}},
		{name: "unknown flag", args: []string{"list", "--force"}, wantCode: 2, wantErr: []string{"force"}},
		{name: "flag of another command", args: []string{"list", "--reason", "x"}, wantCode: 2, wantErr: []string{"reason"}},
		{name: "flag of another command first", args: []string{"--hash", "x", "list"}, wantCode: 2, wantErr: []string{"hash"}},
		{name: "missing id", args: []string{"show"}, wantCode: 2, wantErr: []string{"show <id>"}},
		{name: "extra argument", args: []string{"approve", idA, idB}, wantCode: 2, wantErr: []string{"approve <id>"}},
		{name: "deny without reason", args: []string{"deny", idA}, wantCode: 2, wantErr: []string{"--reason"}},
		{name: "deny with blank reason", args: []string{"deny", idA, "--reason", " "}, wantCode: 2, wantErr: []string{"--reason"}},
		{name: "no token", vars: map[string]string{cli.EnvToken: ""}, args: []string{"list"}, wantCode: 2, wantErr: []string{"no token: pass --token or set TOOLGATE_TOKEN to an approver's token (approvers[] in the config, or the approver token serve --dev printed)"}},
		{name: "bad addr scheme", args: []string{"list", "--addr", "ftp://h:1"}, wantCode: 2, wantErr: []string{"--addr"}},
		{name: "addr without a port", vars: map[string]string{cli.EnvAddr: "localhost"}, args: []string{"list"}, wantCode: 2, wantErr: []string{`--addr "localhost" has no port`, cli.DefaultAddr}},
		{name: "http addr without a port", args: []string{"list", "--addr", "http://127.0.0.1/"}, wantCode: 2, wantErr: []string{"has no port"}},
		{name: "addr with an empty port", args: []string{"list", "--addr", "localhost:"}, wantCode: 2, wantErr: []string{"has no port"}},
		{name: "relative unix socket", args: []string{"list", "--addr", "unix://rel.sock"}, wantCode: 2, wantErr: []string{"absolute"}},
		{name: "short prefix", args: []string{"show", "01900"}, wantCode: 2, wantErr: []string{"at least 6"}},
		{name: "not an id", args: []string{"show", "xyz123"}, wantCode: 2, wantErr: []string{`invalid approval id "xyz123": ids are UUIDs (hex digits and dashes, 36 characters); give a whole id, or at least 6 of its first or last characters`}},
		{name: "ambiguous prefix", args: []string{"approve", "019000"}, wantCode: 1, wantErr: []string{"ambiguous", idA, idB, idC, "pay · refund"}},
		{name: "no match", args: []string{"show", "0bbbbb"}, wantCode: 1, wantErr: []string{`no approval id starts or ends with "0bbbbb"`}},
		{name: "unknown full id", args: []string{"show", "01900000-0000-7000-8000-0000000000ff"}, wantCode: 1, wantErr: []string{"toolgate: 404 not_found:"}},
		{name: "already resolved", args: []string{"approve", idC}, wantCode: 1, wantErr: []string{"toolgate: 409 resolved:", "(state: denied, decided by ", "): nothing was recorded"}},
		{name: "conflicting verdict", vars: map[string]string{cli.EnvToken: "bob-tok"}, args: []string{"approve", idC}, wantCode: 1, wantErr: []string{"toolgate: 409 conflict:"}},
		{name: "self review", vars: map[string]string{cli.EnvToken: "agent-tok"}, args: []string{"approve", idA}, wantCode: 1, wantErr: []string{"toolgate: 403 self_review:"}},
		{name: "not eligible", vars: map[string]string{cli.EnvToken: "bob-tok"}, args: []string{"approve", idB}, wantCode: 1, wantErr: []string{"toolgate: 403 not_eligible:"}},
		{name: "viewer approves", vars: map[string]string{cli.EnvToken: "viewer-tok"}, args: []string{"approve", idA}, wantCode: 1, wantErr: []string{"toolgate: 403 forbidden:"}},
		{name: "bad token", vars: map[string]string{cli.EnvToken: "nope"}, args: []string{"list"}, wantCode: 1, wantErr: []string{"toolgate: 401 unauthorized:"}},
		{name: "hash mismatch", args: []string{"approve", idA, "--hash", hashB}, wantCode: 1, wantErr: []string{"toolgate: 409 hash_mismatch:", hashA}},
		{name: "malformed hash", args: []string{"approve", idA, "--hash", "abc"}, wantCode: 2, wantErr: []string{`toolgate: approve --hash "abc": want "sha256:" and 64 lower-case hex digits`}}, // newuser46: checked before the request; the API's 422 is internal/api's TestStatuses
		{name: "bad state", args: []string{"list", "--state", "waiting"}, wantCode: 2, wantErr: []string{`list --state "waiting"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			for k, v := range tt.vars {
				e.vars[k] = v
			}
			code, out, errs := e.run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.wantCode, errs)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			// Nothing was recorded by a failed review.
			if r := e.state(t, idA); len(r.Reviews) != 0 {
				t.Errorf("%s was reviewed: %+v", idA, r.Reviews)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"--token", "x", "-h"}} {
		code, out, errs := e.run(t, args...)
		if code != 0 || !strings.Contains(out, "Usage: toolgate approvals") || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	code, out, _ := e.run(t, "deny", "-h")
	if code != 0 || !strings.Contains(out, "deny <id> --reason R") || !strings.Contains(out, "-reason") {
		t.Errorf("deny -h: exit %d, stdout %q", code, out)
	}
	var b bytes.Buffer
	cli.Usage(&b)
	for _, w := range []string{"list", "show", "approve", "deny", "--addr", "--token", "--json", "unix://", "at least 6"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("Usage lacks %q", w)
		}
	}
}

func TestAddrAndTokenFlagsOverrideEnv(t *testing.T) {
	e := newEnv(t)
	good := e.addr
	e.vars[cli.EnvAddr] = "http://127.0.0.1:1" // nothing listens there
	e.vars[cli.EnvToken] = "nope"
	if code, _, errs := e.run(t, "list", "--addr", good, "--token", tokAlic); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Without the flags the env values are used (and fail).
	code, _, errs := e.run(t, "list")
	if code != 1 || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("exit %d, stderr %s", code, errs)
	}
}

func TestBareHostPortAddr(t *testing.T) {
	e := newEnv(t)
	e.vars[cli.EnvAddr] = strings.TrimPrefix(e.addr, "http://")
	if code, _, errs := e.run(t, "list"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func TestUnixSocket(t *testing.T) {
	fake := apitest.New(func() time.Time { return t0 })
	for _, r := range fixtures() {
		fake.Add(r)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil { // the admin socket's directory must be private
		t.Fatal(err)
	}
	path := filepath.Join(dir, "admin.sock")
	ln, err := api.Listen(t.Context(), "unix://"+path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- api.New(fake, authenticate, &api.Options{Now: func() time.Time { return t0 }}).Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	e := &env{fake: fake, vars: map[string]string{cli.EnvAddr: "unix://" + path, cli.EnvToken: tokAlic}}
	code, out, errs := e.run(t, "approve", "0abcde", "--reason", "via socket")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if want := idU + ": approve recorded; now approved (1 of 1, decided by alice); the call runs when its holder re-checks it against the policy in force and its approval quorum, if its caller is still waiting or re-sends it; approvals show says what became of it\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
	code, out, _ = e.run(t, "show", idU)
	if code != 0 || !strings.Contains(out, "Reviews:\n  - alice approve at 2026-01-02T03:04:05Z: via socket\n") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

func TestConnectionRefused(t *testing.T) {
	// A listener that is closed at once gives an address nobody answers on.
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := &env{vars: map[string]string{cli.EnvAddr: "http://" + addr, cli.EnvToken: "t"}}
	code, _, errs := e.run(t, "list")
	if code != 1 || !strings.Contains(errs, "toolgate: GET /v1/approvals") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// TestShortIDSuffix checks that a unique suffix of 6 or more characters
// finds an approval as a prefix does, and that a text that is the start of
// one id and the end of another is ambiguous.
func TestShortIDSuffix(t *testing.T) {
	tests := []struct {
		name     string
		arg      string
		wantCode int
		want     []string // in stdout (exit 0) or stderr
	}{
		{"unique suffix", "abcdef0", 0, []string{idS}},
		{"suffix with dashes, upper case", "8000-00000ABCDEF0", 0, []string{idS}},
		{"prefix still works", "0abcde", 0, []string{idU}},
		{"start of one, end of another", "0abcdef0", 1, []string{"ambiguous", idU, idS}},
		{"suffix too short", "def0", 2, []string{"at least 6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.fake.Add(request(idS))
			code, out, errs := e.run(t, "show", tt.arg, "--json")
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", code, tt.wantCode, errs)
			}
			got := errs
			if code == 0 {
				var a api.Approval
				if err := json.Unmarshal([]byte(out), &a); err != nil {
					t.Fatal(err)
				}
				got = a.ID
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("output %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

// TestShowEscapesLookAlikeSpaces: a space other than U+0020 (NBSP, the
// ideographic space U+3000, U+2800) in the arguments is shown as an escape by
// show and list, as the inbox does since fixes31; before, "rm\u00a0-rf"
// printed as "rm -rf" and show gave no warning. show --json keeps the text
// as the API sends it (a program's input, where such spaces are ordinary
// text).
func TestShowEscapesLookAlikeSpaces(t *testing.T) {
	e := newEnv(t)
	r := request("0aaaaaa0-3333-7000-8000-000000000004")
	r.Arguments = json.RawMessage("{\"cmd\":\"rm\u00a0-rf /srv\",\"to\":\"acct\u3000x\u2800\"}")
	e.fake.Add(r)
	for _, args := range [][]string{{"show", string(r.ID)}, {"list"}} {
		code, out, _ := e.run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, raw := range []string{"\u00a0", "\u3000", "\u2800"} {
			if strings.Contains(out, raw) {
				t.Errorf("%v: output holds a raw %U:\n%s", args, []rune(raw)[0], out)
			}
		}
		if !strings.Contains(out, `rm\u00A0-rf`) {
			t.Errorf("%v: no-break space not shown as an escape:\n%s", args, out)
		}
		if args[0] == "show" {
			if !strings.Contains(out, `acct\u3000x\u2800`) {
				t.Errorf("show: ideographic space or braille blank not shown as an escape:\n%s", out)
			}
			if !strings.HasPrefix(out, "WARNING: ") {
				t.Errorf("show: no warning for escaped characters:\n%s", out)
			}
		}
	}
	if _, out, _ := e.run(t, "show", "--json", string(r.ID)); !strings.Contains(out, "rm\u00a0-rf") {
		t.Errorf("show --json changed the API's text:\n%s", out)
	}
}

// TestReviewInDoubt: a decision whose store write may have committed (its
// COMMIT's answer was lost and its outcome could not be learnt:
// store.ErrInDoubt) is printed as the server's 503 saying so, and the CLI
// exits with its failure status (DESIGN "CLI": 1; there is no status of
// its own for "unavailable").
func TestReviewInDoubt(t *testing.T) {
	for _, args := range [][]string{{"approve", idA}, {"deny", idA, "--reason", "no"}} {
		t.Run(args[0], func(t *testing.T) {
			e := newEnv(t)
			e.fake.SetErr(fmt.Errorf("commit: %w: %w: unexpected EOF", store.ErrInDoubt, store.ErrUnavailable))
			code, _, errs := e.run(t, args...)
			if code != cli.ExitFailure {
				t.Errorf("exit %d, want %d; stderr %s", code, cli.ExitFailure, errs)
			}
			if w := "toolgate: 503 unavailable: the decision may have been recorded: read the approval before retrying"; !strings.Contains(errs, w) {
				t.Errorf("stderr lacks %q:\n%s", w, errs)
			}
		})
	}
}
