package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestInboxRowShowsMarkersApart: in the inbox's row of a held call, a
// redaction marker the display copy wrote is a badge, and agent text
// written like one (its "[" written \u005B in the copy) shows that "[" as
// the escape \u005B titled as the agent's own text, as the detail page
// shows them (fixes33); on 9aff199 the row showed both as the same plain
// text.
func TestInboxRowShowsMarkersApart(t *testing.T) {
	g, _, _ := inboxGateway(t)
	b := newBrowser(t)
	cs := g.connect(t, nil, nil)
	b.signIn(g.Admin, approverToken)
	const args = `{"fake":"[redacted: x]","[redacted key 1]":"k","tok":"ghp_0123456789abcdefghijABCDEFGHIJ01234567"}`
	_ = callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	// The API lists the display copy (the token redacted): the one pending.
	var a approvalDoc
	for deadline := time.Now().Add(waitFor(t)); ; time.Sleep(pollEvery) {
		status, body, err := adminDo(t.Context(), http.MethodGet, g.Admin+"/v1/approvals?state=pending", approverToken, nil)
		var l struct {
			Approvals []approvalDoc `json:"approvals"`
		}
		if err == nil && status == http.StatusOK && json.Unmarshal(body, &l) == nil && len(l.Approvals) == 1 {
			a = l.Approvals[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pending approval: %d %s %v", status, body, err)
		}
	}
	b.open(g.Admin, "/ui/")
	row := css(`.card[data-approval-id="%s"] .summary`, a.ID)
	b.wait(waitFor(t), "the held call's row", row)
	sel := `.card[data-approval-id="` + a.ID + `"] .summary`
	badges := eval[[]string](b, `Array.from(document.querySelectorAll('`+sel+` .redacted')).map(e => e.textContent)`)
	if len(badges) != 1 || badges[0] != "[redacted: looks like a GitHub token]" {
		t.Errorf("row %q: badges %q, want the token's marker only", b.text(row), badges)
	}
	fakes := eval[[]string](b, `Array.from(document.querySelectorAll('`+sel+` .hidden')).map(e => e.textContent + " | " + e.title)`)
	const want = `\u005B | the agent's own text, written like a redaction marker: toolgate hid nothing here`
	if len(fakes) != 2 || fakes[0] != want || fakes[1] != want {
		t.Errorf("row %q: marked %q, want the \"[\" of the value and of the key, each %q", b.text(row), fakes, want)
	}
	b.clean()
}
