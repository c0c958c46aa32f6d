package web_test

import (
	"regexp"
	"strings"
	"testing"

	"toolgate/internal/approval"
)

// TestGrantWhenTrueSaysAnyArguments (grants51): an approver remembers a
// call with the condition `true`, which admits any arguments: the flash
// says so as for an empty condition, and the grants page says "(any
// arguments)" after the predicate. On a2628f8c the flash was the plain
// "remembered as a grant".
func TestGrantWhenTrueSaysAnyArguments(t *testing.T) {
	e := newEnv(t, nil)
	r := e.request(1, `{"to":"acct-1","amount":5}`, func(r *approval.Request) {})
	b := e.browser()
	b.signIn(bobTok)
	a := b.post("/ui/approvals/"+string(r.ID)+"/approve", grantForm(r, "1h", "", " true "))
	if a.header.Get("Location") != "/ui/approvals/"+string(r.ID)+"?done=grant-any" {
		t.Fatalf("approve with the condition true: %d %q\n%s", a.status, a.header.Get("Location"), a.body)
	}
	gs := e.grants()
	if len(gs) != 1 {
		t.Fatalf("%d grants, want 1", len(gs))
	}
	row := regexp.MustCompile(`(?s)<tr data-grant-id="` + gs[0].ID + `" data-state="active">.*?</tr>`).FindString(b.page("/ui/grants"))
	if !strings.Contains(row, "(any arguments)") {
		t.Errorf("grant row of a condition always true lacks (any arguments):\n%s", row)
	}
}
