package cli_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestGrantWhenTrueSaysAnyArguments (grants51): `--grant-when true`
// admits every call of the tool, as no predicate does; the CLI says "with
// any arguments" when it makes the grant, and list and show say "(any
// arguments)" after the predicate. On a2628f8c it read like a narrow
// grant ("… until …, when true").
func TestGrantWhenTrueSaysAnyArguments(t *testing.T) {
	e := newGrantEnv(t)
	first := e.call(t, `{"amount":10}`)
	code, out, errs := e.run(t, approvalsCmd, "approve", string(first.ApprovalID), "--grant", "1h", "--grant-when", "true")
	if code != 0 {
		t.Fatalf("approve --grant-when true: exit %d: %s", code, errs)
	}
	m := regexp.MustCompile(`grant ([0-9a-f-]{36}): desktop may call pay · transfer with any arguments until \S+, when true\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("approve --grant-when true printed %q, want it to say any arguments", out)
	}
	if a := e.call(t, `{"amount":50000}`); !a.Allowed || a.Grant != m[1] {
		t.Fatalf("a big call under the grant: %+v, want it allowed (the predicate admits everything)", a)
	}
	if code, out, errs := e.run(t, grantsCmd, "list"); code != 0 || !strings.Contains(out, "true (any arguments)") {
		t.Errorf("grants list: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := e.run(t, grantsCmd, "show", m[1]); code != 0 || !strings.Contains(out, "When:             true (any arguments)") {
		t.Errorf("grants show: exit %d\n%s%s", code, out, errs)
	}
}
