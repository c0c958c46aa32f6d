package policy

import (
	"errors"
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// Limits of When conditions (docs/policy.md "Conditions").
const (
	// CostLimit bounds one evaluation of a condition, in CEL cost units
	// (about one per operation; a comprehension costs per element). A
	// condition that exceeds it is an evaluation error.
	CostLimit = 100_000
	// MaxExpressionLength is the longest When expression, in characters.
	MaxExpressionLength = 4096
)

// celPrincipal is the CEL type of the variable principal.
type celPrincipal struct {
	ID         string   `cel:"id"`
	Groups     []string `cel:"groups"`
	Tenant     string   `cel:"tenant"`
	OnBehalfOf string   `cel:"on_behalf_of"`
}

// principalTypeName is the CEL name of celPrincipal.
const principalTypeName = "toolgate.Principal"

// newCELEnv returns the CEL environment of When conditions: the standard
// library, cross-type numeric comparisons (an int argument compares with a
// double literal and the other way round), and the variables
//
//	args         map(string, dyn)    the call's arguments (see decodeArgs)
//	principal    toolgate.Principal  {id, groups, tenant, on_behalf_of}
//	server, tool string              the real server and tool names
//	session      string              the agent session id, "" for none
//	annotations  map(string, bool)   read_only, destructive, idempotent,
//	                                 open_world; reading one is an error
//	                                 when the server is not trusted
//
// and the path functions path.within(p, dir) and path.clean(p)
// (pathfuncs.go).
func newCELEnv() (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.Types(cel.NativeTypeFor[celPrincipal](types.ParseStructTags(true), cel.NativeTypeAlias(principalTypeName))),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("principal", cel.ObjectType(principalTypeName)),
		cel.Variable("server", cel.StringType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("session", cel.StringType),
		cel.Variable("annotations", cel.MapType(cel.StringType, cel.BoolType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
	}
	return cel.NewEnv(append(opts, pathFunctions()...)...)
}

// condition is a compiled When expression.
type condition struct {
	src string
	prg cel.Program
}

// compileCondition parses and type-checks src in env. The result must be a
// bool (or dyn, checked at run time).
func compileCondition(env *cel.Env, src string) (*condition, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("empty expression")
	}
	if n := len([]rune(src)); n > MaxExpressionLength {
		return nil, fmt.Errorf("expression is %d characters, at most %d", n, MaxExpressionLength)
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, errors.New(strings.TrimPrefix(iss.Err().Error(), "ERROR: "))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("must evaluate to a bool, not %s", cel.FormatCELType(t))
	}
	if err := checkPathLiterals(ast); err != nil {
		return nil, err
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, err
	}
	return &condition{src: src, prg: prg}, nil
}

// eval evaluates the condition against act: true or false, or an error for
// anything else (an evaluation error, the cost limit, a non-bool result).
func (c *condition) eval(act interpreter.Activation) (bool, error) {
	out, _, err := c.prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("evaluated to %s, not a bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// activation resolves the variables of a condition for one call; args and
// annotations are built on first use and kept for the other conditions of
// the same evaluation.
type activation struct {
	c  Call
	st *callState
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		m, err := a.st.args()
		if err != nil {
			return argError(err), true
		}
		return m, true
	case "principal":
		p := &a.c.Principal
		groups := p.Groups
		if groups == nil {
			groups = []string{}
		}
		return &celPrincipal{ID: p.ID, Groups: groups, Tenant: p.Tenant, OnBehalfOf: p.OnBehalfOf}, true
	case "server":
		return a.c.Server, true
	case "tool":
		return a.c.Tool, true
	case "session":
		return a.c.Session, true
	case "annotations":
		return a.st.annotations(), true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// annotationValues is the CEL value of "annotations" for a: known values, or
// an error value under every key when a is nil (not trusted).
func annotationValues(a *Annotations) map[string]any {
	if a == nil {
		e := types.NewErr("the annotations of this tool are unknown: its server is not marked trust_annotations")
		return map[string]any{"read_only": e, "destructive": e, "idempotent": e, "open_world": e}
	}
	return map[string]any{
		"read_only":   types.Bool(a.ReadOnly),
		"destructive": types.Bool(a.Destructive),
		"idempotent":  types.Bool(a.Idempotent),
		"open_world":  types.Bool(a.OpenWorld),
	}
}
