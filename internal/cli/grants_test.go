package cli_test

import (
	"bytes"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// grantEnv is the CLI against a real admin API, gate and SQLite store whose
// policy asks for one approval of every call, in retry mode.
type grantEnv struct {
	g    *gate.Gate
	vars map[string]string
}

func newGrantEnv(t *testing.T) *grantEnv {
	t.Helper()
	db := sqlitetest.Open(t)
	pol := &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Hour, Mode: policy.ModeRetry, Approvals: 1, ValidFor: time.Hour}}
	g := gate.New(db, pol, &gate.Options{RetryWait: time.Nanosecond, GrantMaxTTL: 24 * time.Hour})
	srv := httptest.NewServer(api.New(g, authenticate, &api.Options{Grants: g}))
	t.Cleanup(srv.Close)
	return &grantEnv{g: g, vars: map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: tokAlic}}
}

func (e *grantEnv) call(t *testing.T, args string) gate.Admission {
	t.Helper()
	return e.g.Admit(t.Context(), gate.Call{Principal: approval.Principal{ID: "desktop", Kind: "agent"}, Server: "pay", Tool: "transfer", Arguments: []byte(args)})
}

func (e *grantEnv) run(t *testing.T, run func(ctx testingContext, args []string, out, errw *bytes.Buffer, env func(string) string) int, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t, args, &out, &errb, func(k string) string { return e.vars[k] })
	return code, out.String(), errb.String()
}

// testingContext is the *testing.T a command runs under (its context).
type testingContext = *testing.T

func approvalsCmd(t testingContext, args []string, out, errw *bytes.Buffer, env func(string) string) int {
	t.Helper()
	return cli.Run(t.Context(), args, out, errw, env)
}

func grantsCmd(t testingContext, args []string, out, errw *bytes.Buffer, env func(string) string) int {
	t.Helper()
	return cli.RunGrants(t.Context(), args, out, errw, env)
}

var grantLine = regexp.MustCompile(`grant ([0-9a-f-]{36}): desktop may call pay · transfer until \S+, at most 2 times, when args.amount <= 100`)

func TestGrantCommands(t *testing.T) {
	e := newGrantEnv(t)
	first := e.call(t, `{"amount":10}`)
	code, out, errs := e.run(t, approvalsCmd, "approve", string(first.ApprovalID), "--grant", "1h", "--grant-uses", "2", "--grant-when", "args.amount <= 100", "--reason", "small ones today")
	if code != 0 {
		t.Fatalf("approve --grant: exit %d: %s", code, errs)
	}
	m := grantLine.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "now approved (1 of 1, decided by alice)") {
		t.Fatalf("approve --grant printed %q", out)
	}
	id := m[1]
	if a := e.call(t, `{"amount":20}`); !a.Allowed || a.Grant != id {
		t.Fatalf("call under the grant: %+v", a)
	}

	code, out, errs = e.run(t, grantsCmd, "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "1/2") || !strings.Contains(out, "args.amount <= 100") {
		t.Errorf("grants list: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = e.run(t, grantsCmd, "show", id[:13])
	for _, want := range []string{"Grant:            " + id, "State:            active", "Uses:             1 (max: 2)", "Approved by:      alice (quorum 1)", "Reason:           small ones today", "Recent uses:", "#1 at", "by desktop, arguments sha256:"} {
		if !strings.Contains(out, want) {
			t.Errorf("grants show lacks %q: exit %d\n%s%s", want, code, out, errs)
		}
	}
	code, out, errs = e.run(t, grantsCmd, "revoke", id, "--reason", "that's enough")
	if code != 0 || !strings.Contains(out, id+": revoked by alice at ") || !strings.Contains(out, "(used 1/2)") {
		t.Errorf("grants revoke: exit %d\n%s%s", code, out, errs)
	}
	if a := e.call(t, `{"amount":30}`); a.Allowed {
		t.Errorf("call after the revocation: %+v", a)
	}
	if code, out, _ := e.run(t, grantsCmd, "list"); code != 0 || out != "no active grants\n" {
		t.Errorf("grants list after the revocation: exit %d %q", code, out)
	}
	if code, out, _ := e.run(t, grantsCmd, "list", "--all", "--json"); code != 0 || !strings.Contains(out, `"state":"revoked"`) {
		t.Errorf("grants list --all --json: exit %d %s", code, out)
	}
}

func TestGrantCommandErrors(t *testing.T) {
	e := newGrantEnv(t)
	id := string(e.call(t, `{"amount":10}`).ApprovalID)
	cases := []struct {
		name string
		run  func(testingContext, []string, *bytes.Buffer, *bytes.Buffer, func(string) string) int
		args []string
		code int
		msg  string
	}{
		{"uses without --grant", approvalsCmd, []string{"approve", id, "--grant-uses", "2"}, 2, "--grant-uses and --grant-when need --grant D"},
		{"when without --grant", approvalsCmd, []string{"approve", id, "--grant-when", "true"}, 2, "need --grant D"},
		{"zero duration", approvalsCmd, []string{"approve", id, "--grant", "0s"}, 2, "want a positive duration"},
		{"negative uses", approvalsCmd, []string{"approve", id, "--grant", "1h", "--grant-uses", "-1"}, 2, "want 1 or more"},
		{"not a duration", approvalsCmd, []string{"approve", id, "--grant", "soon"}, 2, "invalid value"},
		{"past max_ttl", approvalsCmd, []string{"approve", id, "--grant", "25h"}, 1, "above grants.max_ttl 24h0m0s; it is refused, not shortened"},
		{"bad predicate", approvalsCmd, []string{"approve", id, "--grant", "1h", "--grant-when", "args.amount <"}, 1, "when:"},
		{"no command", grantsCmd, nil, 2, "missing command"},
		{"unknown command", grantsCmd, []string{"grant"}, 2, `unknown command "grant"`},
		{"bad limit", grantsCmd, []string{"list", "--limit", "0"}, 2, "want 1 to 1000"},
		{"short prefix", grantsCmd, []string{"show", "0190"}, 2, "too short"},
		{"unknown grant", grantsCmd, []string{"revoke", "01900000-0000-7000-8000-0000000000ff"}, 1, "no grant"},
		{"no prefix match", grantsCmd, []string{"show", "0fffff"}, 1, `no grant id starts or ends with "0fffff"`},
	}
	for _, tc := range cases {
		code, _, errs := e.run(t, tc.run, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.msg) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d with %q", tc.name, code, errs, tc.code, tc.msg)
		}
	}
	// Nothing was recorded by the refused approves.
	if code, out, _ := e.run(t, approvalsCmd, "show", id); code != 0 || !strings.Contains(out, "Reviews:            none") {
		t.Errorf("approval after refused approves:\n%s", out)
	}
	// Viewers cannot revoke.
	e.vars[cli.EnvToken] = "viewer-tok"
	if code, _, errs := e.run(t, grantsCmd, "revoke", "01900000-0000-7000-8000-0000000000ff"); code != 1 || !strings.Contains(errs, "roles") {
		t.Errorf("revoke as a viewer: exit %d %q", code, errs)
	}
}

// TestGrantIDSuffix checks that grants, like approvals, are found by a
// unique end of their id: two grants made in the same millisecond-ish share
// their first 8 characters (UUIDv7), so a short prefix is ambiguous while
// the last 8 characters pick one.
func TestGrantIDSuffix(t *testing.T) {
	e := newGrantEnv(t)
	var ids []string
	for _, amount := range []string{`{"amount":1}`, `{"amount":2}`} {
		a := e.call(t, amount)
		code, out, errs := e.run(t, approvalsCmd, "approve", string(a.ApprovalID), "--grant", "1h", "--grant-uses", "1", "--grant-when", "args.amount == "+amount[10:11])
		m := regexp.MustCompile(`grant ([0-9a-f-]{36}):`).FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("approve --grant: exit %d\n%s%s", code, out, errs)
		}
		ids = append(ids, m[1])
	}
	if ids[0][:8] != ids[1][:8] {
		t.Logf("grants %s and %s do not share their first 8 characters; the ambiguous-prefix case is not exercised", ids[0], ids[1])
	} else if code, _, errs := e.run(t, grantsCmd, "show", ids[0][:8]); code != 1 || !strings.Contains(errs, "ambiguous") || !strings.Contains(errs, ids[0]) || !strings.Contains(errs, ids[1]) {
		t.Errorf("grants show <shared prefix>: exit %d, stderr %q; want an ambiguous id listing both", code, errs)
	}
	for _, id := range ids {
		code, out, errs := e.run(t, grantsCmd, "show", strings.ToUpper(id[len(id)-8:]))
		if code != 0 || !strings.Contains(out, "Grant:            "+id) {
			t.Errorf("grants show <last 8 of %s>: exit %d\n%s%s", id, code, out, errs)
		}
	}
	id := ids[1]
	if code, out, errs := e.run(t, grantsCmd, "revoke", id[len(id)-12:], "--reason", "by its end"); code != 0 || !strings.Contains(out, id+": revoked by alice") {
		t.Errorf("grants revoke <suffix>: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := e.run(t, grantsCmd, "show", "abcdef"); code != 1 || !strings.Contains(errs, `no grant id starts or ends with "abcdef"`) {
		t.Errorf("grants show abcdef: exit %d, stderr %q", code, errs)
	}
}
