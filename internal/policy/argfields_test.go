package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestArgFields(t *testing.T) {
	tests := []struct {
		src  string
		want []string
	}{
		{`args.amount > 1000`, []string{"amount"}},
		{`args["to"] == "x" && has(args.memo) || "tag" in args`, []string{"memo", "tag", "to"}},
		{`args.a.b == 1 && args.a.c == 2`, []string{"a"}},
		{`args.exists(k, k == args.x)`, []string{"x"}},
		{`principal.id == "alice" && tool == "x"`, nil},
		{`args[tool] == 1`, nil}, // a computed key is not listed
	}
	for _, tt := range tests {
		got, err := ArgFields(tt.src)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ArgFields(%q) = %q, %v; want %q", tt.src, got, err, tt.want)
		}
	}
	if _, err := ArgFields(`args.amount >`); err == nil {
		t.Error("ArgFields of a broken expression: no error")
	}
}

// TestUnknownArgFields: a condition reading a field that the input schema
// of every tool its rule matches lacks (a typo) is reported, naming the
// rule, the field and what the schema declares; a field one of the
// matched tools declares, and rules matching no known tool, are not.
func TestUnknownArgFields(t *testing.T) {
	p := &Policy{
		Default:  Allow,
		Approval: Approval{Timeout: time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules: []Rule{
			{Name: "big", Server: "pay", Tools: []string{"transfer"}, When: `args.ammount > 1000`, Effect: Approve},
			{Name: "ok", Server: "pay", Tools: []string{"transfer"}, When: `args.amount > 1000 && has(args.memo)`, Effect: Approve},
			{Name: "any pay", Server: "pay", When: `args.to == "x"`, Effect: Deny},                         // refund has "to"
			{Name: "glob", Server: "p*", Tools: []string{"re*"}, When: `args["amount"] > 1`, Effect: Deny}, // refund lacks amount
			{Name: "unknown tool", Server: "fs", When: `args.pth == "/"`, Effect: Deny},
			{Name: "prompts only", Server: "pay", Prompts: []string{"x"}, When: `args.nope == 1`, Effect: Deny},
		},
	}
	if errs := p.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	tools := []ToolArgs{
		{Server: "pay", Tool: "transfer", Properties: []string{"amount", "memo", "to"}},
		{Server: "pay", Tool: "refund", Properties: []string{"id", "to"}},
	}
	errs := p.UnknownArgFields(tools)
	want := []string{
		`rules[0] "big": when reads args.ammount, but the input schema of pay/transfer does not declare it (it declares: amount, memo, to)`,
		`rules[3] "glob": when reads args.amount, but the input schema of pay/refund does not declare it (it declares: id, to)`,
	}
	if len(errs) != len(want) {
		t.Fatalf("UnknownArgFields = %q, want %d errors", errs, len(want))
	}
	for i, err := range errs {
		var fe *FieldError
		if !strings.HasPrefix(err.Error(), want[i]) || !errors.As(err, &fe) || fe.Key != "when" {
			t.Errorf("error %d = %v (%+v), want prefix %q and key when", i, err, fe, want[i])
		}
	}
	var fe *FieldError
	if !errors.As(errs[0], &fe) || fe.Path() != "rules[0].when" {
		t.Errorf("FieldError %+v, want path rules[0].when", fe)
	}
}

// TestUnknownCommandArgument (newuser46): a command selector naming an
// argument no matched tool declares is reported with key
// command.argument, for allow and deny rules alike; a declared one, an
// open schema and a rule matching no known tool are not.
func TestUnknownCommandArgument(t *testing.T) {
	cmd := func(arg string) *CommandMatch { return &CommandMatch{Argument: arg, Match: []string{"rm *"}} }
	p := &Policy{
		Default:  Approve,
		Approval: Approval{Timeout: time.Minute, Mode: ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules: []Rule{
			{Name: "no rm", Server: "shell", Tools: []string{"run"}, Command: cmd("cmd"), Effect: Deny},
			{Name: "reads", Server: "shell", Tools: []string{"run"}, Command: cmd("comand"), Effect: Allow},
			{Name: "fine", Server: "shell", Tools: []string{"run"}, Command: cmd("command"), Effect: Deny},
			{Name: "open", Server: "open", Command: cmd("x"), Effect: Deny},
			{Name: "unknown", Server: "fs", Command: cmd("x"), Effect: Deny},
		},
	}
	if errs := p.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	errs := p.UnknownArgFields([]ToolArgs{
		{Server: "shell", Tool: "run", Properties: []string{"command"}},
		{Server: "open", Tool: "run", Properties: []string{"command"}, Open: true},
	})
	want := []string{
		`rules[0] "no rm": command.argument is "cmd", but the input schema of shell/run does not declare it (it declares: command); so the command is missing from every call, which counts as a match: this deny rule decides every call of those tools`,
		`rules[1] "reads": command.argument is "comand", but the input schema of shell/run does not declare it (it declares: command); so the command is missing from every call and this allow rule never matches`,
	}
	if len(errs) != len(want) {
		t.Fatalf("UnknownArgFields = %q, want %q", errs, want)
	}
	for i, err := range errs {
		var fe *FieldError
		if err.Error() != want[i] || !errors.As(err, &fe) || fe.Path() != fmt.Sprintf("rules[%d].command.argument", i) {
			t.Errorf("error %d = %v (%+v), want %q at rules[%d].command.argument", i, err, fe, want[i], i)
		}
	}
}
