package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// mustCompile compiles p after checking that it validates.
func mustCompile(tb testing.TB, p *Policy) *Evaluator {
	tb.Helper()
	if errs := p.Validate(); errs != nil {
		tb.Fatalf("Validate: %v", errs)
	}
	e, err := Compile(p)
	if err != nil {
		tb.Fatalf("Compile: %v", err)
	}
	return e
}

func eval(tb testing.TB, e *Evaluator, c Call) Decision {
	tb.Helper()
	d, err := e.Evaluate(c)
	if err != nil {
		tb.Fatalf("Evaluate: %v", err)
	}
	return d
}

func transfer(args string) Call {
	return Call{Server: "pay", Tool: "transfer", Arguments: json.RawMessage(args), Principal: Principal{ID: "agent-1"}}
}

// TestConditionAmount is issue 12's first acceptance test: with
// `args.amount <= 100` on an allow rule and the default approve, 100 runs
// and 101 is held; an integer past 2^63 and a string where a number is
// expected are evaluation errors that do not allow.
func TestConditionAmount(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve,
		Rule{Name: "small transfers", Server: "pay", Tools: []string{"transfer"}, Effect: Allow, When: "args.amount <= 100"}))
	cases := []struct {
		args    string
		want    Effect
		wantErr string // substring of the rule's error, "" for none
	}{
		{`{"amount":100}`, Allow, ""},
		{`{"amount":101}`, Approve, ""},
		{`{"amount":-5}`, Allow, ""},
		{`{"amount":100.0}`, Allow, ""},
		{`{"amount":100.5}`, Approve, ""},
		{`{"amount":1e2}`, Allow, ""},
		{`{"amount":9223372036854775807}`, Approve, ""},
		{`{"amount":9223372036854775808}`, Approve, "int64"},
		{`{"amount":-9223372036854775809}`, Approve, "int64"},
		{`{"amount":18446744073709551616}`, Approve, "int64"},
		{`{"amount":"50"}`, Approve, "no such overload"},
		{`{"amount":null}`, Approve, "no such overload"},
		{`{"amount":[1]}`, Approve, "no such overload"},
		{`{}`, Approve, "no such key"},
		{`{"amount":1e400}`, Approve, "not finite"},
		{`{"amount":100.00000000000000001}`, Approve, "precision"},
		{`{"amount":1e-400}`, Approve, "precision"},
		{`{"amount":5,"amount":500}`, Approve, "repeat"},
		{`[100]`, Approve, "not a JSON object"},
		{`{"amount":100`, Approve, "not valid JSON"},
		{`{"amount":100} {}`, Approve, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			d := eval(t, e, transfer(c.args))
			if d.Effect != c.want {
				t.Errorf("effect %s (rule %q), want %s", d.Effect, d.Rule, c.want)
			}
			var got string
			for _, re := range d.Errors {
				got += re.Rule + ": " + re.Err.Error()
			}
			switch {
			case c.wantErr == "" && got != "":
				t.Errorf("unexpected rule error %q", got)
			case c.wantErr != "" && !strings.Contains(got, c.wantErr):
				t.Errorf("rule errors %q, want one containing %q", got, c.wantErr)
			}
		})
	}
}

// TestConditionErrorNeverAllows checks the error semantics per effect: an
// erroring allow rule does not match; an erroring deny or approve rule
// matches.
func TestConditionErrorNeverAllows(t *testing.T) {
	bad := `{"amount":"lots"}` // a string where a number is expected
	cases := []struct {
		name string
		rule Rule
		def  Effect
		want Effect
	}{
		{"erroring allow does not match", Rule{Effect: Allow}, Approve, Approve},
		{"erroring allow under default deny", Rule{Effect: Allow}, Deny, Deny},
		{"erroring deny matches", Rule{Effect: Deny}, Allow, Deny},
		{"erroring approve matches", Rule{Effect: Approve}, Allow, Approve},
		{"erroring approve cannot lift a default deny", Rule{Effect: Approve}, Deny, Deny},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.rule.Name, c.rule.When = "r", "args.amount > 1000"
			e := mustCompile(t, newPolicy(c.def, c.rule))
			d := eval(t, e, transfer(bad))
			if d.Effect != c.want {
				t.Fatalf("effect %s by %q, want %s", d.Effect, d.Rule, c.want)
			}
			if len(d.Errors) != 1 || d.Errors[0].Rule != "r" {
				t.Errorf("Errors = %v, want one for rule r", d.Errors)
			}
			// The same rule with a well-typed argument decides normally.
			if d := eval(t, e, transfer(`{"amount":5}`)); d.Effect != c.def {
				t.Errorf("amount 5: effect %s, want the default %s", d.Effect, c.def)
			}
		})
	}
}

// TestConditionLoadErrors checks that conditions are parsed and
// type-checked when the policy loads, and that errors name the rule.
func TestConditionLoadErrors(t *testing.T) {
	cases := []struct {
		when string
		want string
	}{
		{"tool > 5", `rules[0] "typed": when: `},
		{"tool > 5", "no matching overload"},
		{"principal.grups == []", "undefined field 'grups'"},
		{"args.amount <=", "Syntax error"},
		{"tool", "must evaluate to a bool, not string"},
		{"args.amount + 1", "must evaluate to a bool"},
		{"unknown_var == 1", "undeclared reference"},
		{"   ", "empty expression"},
		{strings.Repeat("true && ", 700) + "true", "at most 4096"},
	}
	for _, c := range cases {
		t.Run(c.when[:min(len(c.when), 30)], func(t *testing.T) {
			p := newPolicy(Approve, Rule{Name: "typed", Effect: Allow, When: c.when})
			errs := p.Validate()
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
				t.Fatalf("Validate = %v, want one error containing %q", errs, c.want)
			}
			if !strings.Contains(errs[0].Error(), `"typed"`) {
				t.Errorf("error %q does not name the rule", errs[0])
			}
			if _, err := Compile(p); err == nil || !strings.Contains(err.Error(), `"typed"`) {
				t.Errorf("Compile error %v does not name the rule", err)
			}
			// Holder fails closed with a policy that does not compile.
			if d, err := NewHolder(p).Evaluate(Call{Server: "s", Tool: "t"}); err == nil || d.Effect != Deny {
				t.Errorf("Holder.Evaluate = %s, %v; want deny and an error", d.Effect, err)
			}
		})
	}
}

// TestConditionVariables checks each variable a condition sees.
func TestConditionVariables(t *testing.T) {
	c := Call{
		Server: "pay", Tool: "transfer", Session: "sess-1",
		Principal:   Principal{ID: "agent-1", Groups: []string{"ops", "bots"}, Tenant: "acme", OnBehalfOf: "alice"},
		Arguments:   json.RawMessage(`{"to":"acct-9","amount":12.5,"tags":["a","b"],"nested":{"n":3},"big":18446744073709551615,"flag":true}`),
		Annotations: &Annotations{ReadOnly: true, Idempotent: true},
	}
	holds := []string{
		`server == "pay" && tool == "transfer"`,
		`session == "sess-1"`,
		`principal.id == "agent-1" && principal.tenant == "acme" && principal.on_behalf_of == "alice"`,
		`"ops" in principal.groups && principal.groups.size() == 2`,
		`args.to.startsWith("acct-") && args.amount > 12 && args.amount < 13`,
		`args.amount == 12.5 && 12.5 >= args.amount`,
		`args.tags.exists(t, t == "b") && args.nested.n == 3 && args.flag`,
		`has(args.to) && !has(args.from)`,
		`has(args.big)`, // present; reading it would be an error
		`annotations.read_only && !annotations.destructive && annotations.idempotent && !annotations.open_world`,
		`args.size() == 6`,
	}
	for _, w := range holds {
		t.Run(w, func(t *testing.T) {
			e := mustCompile(t, newPolicy(Deny, Rule{Name: "r", Effect: Allow, When: w}))
			if d := eval(t, e, c); d.Effect != Allow || len(d.Errors) > 0 {
				t.Errorf("effect %s, errors %v; want allow", d.Effect, d.Errors)
			}
		})
	}
	// Reading the big integer, or annotations of an untrusted server, is an
	// evaluation error.
	for _, w := range []string{`args.big > 0`, `annotations.read_only`} {
		t.Run(w, func(t *testing.T) {
			e := mustCompile(t, newPolicy(Deny, Rule{Name: "r", Effect: Allow, When: w}))
			untrusted := c
			untrusted.Annotations = nil
			d := eval(t, e, untrusted)
			if d.Effect != Deny || len(d.Errors) != 1 {
				t.Errorf("effect %s, errors %v; want deny with an error", d.Effect, d.Errors)
			}
		})
	}
}

// TestConditionCostLimit checks that an expensive condition stops at the
// cost limit with an error (which never allows) instead of running on.
func TestConditionCostLimit(t *testing.T) {
	e := mustCompile(t, newPolicy(Approve, Rule{Name: "slow", Effect: Allow,
		When: `args.xs.all(a, args.xs.all(b, args.xs.all(c, a + b + c >= 0)))`}))
	xs := make([]int, 200)
	raw, _ := json.Marshal(map[string]any{"xs": xs})
	d := eval(t, e, Call{Server: "s", Tool: "t", Arguments: raw})
	if d.Effect != Approve || len(d.Errors) != 1 || !strings.Contains(d.Errors[0].Err.Error(), "cost") {
		t.Fatalf("effect %s, errors %v; want approve and a cost limit error", d.Effect, d.Errors)
	}
	// Small inputs stay under the limit.
	if d := eval(t, e, Call{Server: "s", Tool: "t", Arguments: json.RawMessage(`{"xs":[1,2,3]}`)}); d.Effect != Allow {
		t.Errorf("small input: effect %s, errors %v", d.Effect, d.Errors)
	}
}

// TestArgumentsDecodedOnce checks that the arguments are decoded once for
// all the conditions of an evaluation, and not at all when no candidate
// rule needs them.
func TestArgumentsDecodedOnce(t *testing.T) {
	p := newPolicy(Approve,
		Rule{Name: "a", Server: "pay", Effect: Allow, When: "args.amount < 10"},
		Rule{Name: "b", Server: "pay", Effect: Deny, When: "args.amount > 1000"},
		Rule{Name: "c", Server: "pay", Effect: Approve, Command: &CommandMatch{Argument: "cmd", Match: []string{"x"}}},
		Rule{Name: "fs", Server: "fs", Effect: Allow},
	)
	e := mustCompile(t, p)
	ls := lazyState{raw: json.RawMessage(`{"amount":5,"cmd":"y"}`)}
	c := transfer(`{"amount":5,"cmd":"y"}`)
	for _, i := range e.byName(c.Kind, c.Server, c.Name()) {
		if _, _, _, err := e.rules[i].matches(&c, &ls); err != nil {
			t.Fatal(err)
		}
	}
	if ls.s == nil || !ls.s.decoded {
		t.Fatal("arguments were not decoded")
	}
	// Mark the decoded map: a second decode would lose the mark.
	ls.s.argsMap["\x00mark"] = true
	for _, i := range e.byName(c.Kind, c.Server, c.Name()) {
		_, _, _, _ = e.rules[i].matches(&c, &ls)
	}
	if ls.s.argsMap["\x00mark"] != true {
		t.Fatal("the arguments were decoded again")
	}
	// A call only name-matched rules decide never makes the state.
	fs := Call{Server: "fs", Tool: "read", Arguments: json.RawMessage(`{not json`)}
	ls2 := lazyState{raw: fs.Arguments}
	for _, i := range e.byName(fs.Kind, fs.Server, fs.Name()) {
		_, _, _, _ = e.rules[i].matches(&fs, &ls2)
	}
	if ls2.s != nil {
		t.Error("arguments decoded for a call no argument-dependent rule names")
	}
	if d := eval(t, e, fs); d.Effect != Allow {
		t.Errorf("fs call: effect %s", d.Effect)
	}
}

// FuzzCondition checks that no expression and no arguments make compiling
// or evaluating panic, and that an allow rule whose condition errs never
// allows. The seed corpus runs in normal tests.
func FuzzCondition(f *testing.F) {
	seeds := []struct{ expr, args string }{
		{"args.amount <= 100", `{"amount":100}`},
		{"args.amount <= 100", `{"amount":9223372036854775808}`},
		{"args.amount <= 100", `{"amount":"x"}`},
		{`args.to.matches("^acct-[0-9]+$")`, `{"to":"acct-1"}`},
		{`args.xs.all(x, x > 0)`, `{"xs":[1,2,-1e308]}`},
		{`size(args) > 0 && principal.id != ""`, `{"a":{"b":[null,true,"\u0000"]}}`},
		{`args.a / args.b > 1`, `{"a":1,"b":0}`},
		{`int(args.s) > 3`, `{"s":"99999999999999999999"}`},
		{`args["k"] in ["a"]`, `{"k":"a"}`},
		{`annotations.read_only`, `{}`},
		{`((((((((((true))))))))))`, `{}`},
		{`args.amount <= 1e308 * 10`, `{"amount":1.7976931348623157e308}`},
	}
	for _, s := range seeds {
		f.Add(s.expr, s.args)
	}
	env, err := newCELEnv()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr, args string) {
		cond, err := compileCondition(env, expr)
		if err != nil {
			return
		}
		c := Call{Server: "pay", Tool: "transfer", Arguments: json.RawMessage(args), Principal: Principal{ID: "a"}}
		st := &callState{raw: c.Arguments}
		ok, evalErr := cond.eval(&activation{c: c, st: st}) // no recover: a panic fails the fuzz
		e := &Evaluator{p: newPolicy(Approve), rules: []crule{{name: "r", effect: Allow, serverAny: true, toolsAny: true, when: cond}},
			byServer: map[string][]int32{}, anyServer: []int32{0}}
		d, _ := e.Evaluate(c)
		switch {
		case evalErr != nil && d.Effect == Allow:
			t.Fatalf("condition %q errs (%v) on %q, yet the call is allowed", expr, evalErr, args)
		case evalErr == nil && ok != (d.Effect == Allow):
			t.Fatalf("condition %q is %v on %q, yet the effect is %s", expr, ok, args, d.Effect)
		}
	})
}
