package policyfile

import (
	"fmt"
	"slices"
	"strings"

	"toolgate/internal/config"
)

// Tokens are read once, when serve starts: a reload applies only the
// policy. A token rotated in its file (or a token_sha256 edited) while
// the process runs is therefore not in force until a restart, and the
// reload says so (the config's keys may be unchanged, so
// changedOutsidePolicy cannot tell).

// principalTokens resolves the agent and approver tokens of c, as serve
// does at start, with the files of c read once (config.Config.ReadFiles),
// to a map from principal (`approver "bob"`) to the token's hash. The
// error is config.Config.Tokens': it names principals and files, never a
// token.
func principalTokens(c config.Config, env config.Env, files config.Files) (map[string]string, error) {
	creds, err := c.Tokens(env, files.ReadFile)
	if err != nil {
		return nil, err
	}
	return principals(creds), nil
}

// principals maps creds (by token hash) to a map from principal
// (`approver "bob"`) to the token's hash.
func principals(creds map[string]config.Credential) map[string]string {
	out := make(map[string]string, len(creds))
	for hash, cr := range creds {
		kind := "approver"
		if cr.Principal.Kind == config.KindAgent {
			kind = "agent"
		}
		out[fmt.Sprintf("%s %q", kind, cr.Principal.ID)] = hash
	}
	return out
}

// changedTokens names, sorted, the principals whose token differs between
// a and b (changed, added or removed).
func changedTokens(a, b map[string]string) []string {
	var out []string
	for who, h := range b {
		if a[who] != h {
			out = append(out, who)
		}
	}
	for who := range a {
		if _, ok := b[who]; !ok {
			out = append(out, who)
		}
	}
	slices.Sort(out)
	return out
}

// tokenWarning returns the warning a reload of cfg logs about tokens, or
// "" when the tokens in cfg's sources are the ones the process started
// with. running is principalTokens of the start (nil when it could not be
// read then).
func tokenWarning(running map[string]string, cfg config.Config, env config.Env, files config.Files) string {
	now, err := principalTokens(cfg, env, files)
	if err != nil {
		return "agent or approver tokens cannot be read; the tokens in force stay, and a restart would refuse to start: " +
			strings.Join(config.Lines(err), "; ")
	}
	if running == nil {
		return ""
	}
	if who := changedTokens(running, now); len(who) > 0 {
		return "agent or approver tokens changed (" + strings.Join(who, ", ") +
			"); a reload applies only the policy: the old tokens stay valid and the new ones are refused until a restart"
	}
	return ""
}
