package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"

	"toolgate/internal/approval"
	"toolgate/internal/privfile"
)

// Credential is what a bearer token authenticates as.
type Credential struct {
	// Principal has Kind "agent" for configured agents and "human" for
	// approvers.
	Principal approval.Principal
	// Roles are the approver's roles (viewer, approver, admin, host); nil
	// for agents.
	Roles []string
}

// Principal kinds.
const (
	KindAgent = "agent"
	KindHuman = "human"
)

// TokenHash returns the lowercase hex SHA-256 of token, the key of the map
// Tokens returns; authenticate a bearer token by looking up
// TokenHash(token).
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Tokens resolves every configured agent and approver token to its
// SHA-256 (TokenHash, lowercase hex) and maps it to the Credential it
// authenticates. token_env is read with env (a set but empty variable is an
// error), token_file with readFile (contents trimmed of surrounding
// whitespace; empty is an error), and token_sha256 is taken as given
// (lowercased). The error joins every problem, each naming the principal and
// the variable or file, never a token: unset variables, unreadable or
// empty files, a principal with no or several token sources, and two
// principals sharing one token. Call it at serve time, after Validate,
// with the ReadFile of [Config.ReadFiles]: an approver's token file that
// is not private is then its error here.
func (c Config) Tokens(env Env, readFile func(string) ([]byte, error)) (map[string]Credential, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	out := map[string]Credential{}
	owner := map[string]string{} // hash → who
	var errs []error
	add := func(who string, t Token, cred Credential) {
		hash, err := t.resolve(env, readFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", who, err))
			return
		}
		if prev, dup := owner[hash]; dup {
			errs = append(errs, fmt.Errorf("%s: same token as %s", who, prev))
			return
		}
		owner[hash] = who
		out[hash] = cred
	}
	for i, a := range c.Agents {
		add(fmt.Sprintf("agents[%d] %q", i, a.ID), a.Token, Credential{Principal: approval.Principal{
			ID: a.ID, Kind: KindAgent, Tenant: a.Tenant, Groups: a.Groups, OnBehalfOf: a.OnBehalfOf,
		}})
	}
	for i, a := range c.Approvers {
		add(fmt.Sprintf("approvers[%d] %q", i, a.ID), a.Token, a.credential())
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// credential is what a's token authenticates as.
func (a Approver) credential() Credential {
	return Credential{
		Principal: approval.Principal{ID: a.ID, Kind: KindHuman, Tenant: a.Tenant, Groups: a.Groups},
		Roles:     a.Roles,
	}
}

// DevApproverID is the id of the approver serve --dev mints (role admin).
const DevApproverID = "dev-approver"

// DevApprover is the credential of serve --dev's approver, without its
// token: a human with role admin, id DevApproverID.
func DevApprover() Credential {
	return Credential{Principal: approval.Principal{ID: DevApproverID, Kind: KindHuman}, Roles: []string{RoleAdmin}}
}

// ApproverCredentials returns what each of c's approvers' tokens
// authenticates as (the values Tokens maps their tokens to), without
// reading a token: for `policy explain`, which has no tokens. nil when c
// has no approvers.
func (c Config) ApproverCredentials() []Credential {
	var out []Credential
	for _, a := range c.Approvers {
		out = append(out, a.credential())
	}
	return out
}

// Reviewers returns the roster of the gate's quorum check
// (gate.Options.Reviewers, through gate.ReviewersOf): of people (the
// credentials the admin API accepts: Tokens' values, plus serve --dev's
// approver; or ApproverCredentials), the humans with role approver or
// admin, as principals (id, groups, tenant), in people's order. It is nil,
// "not known", with approvals.allow_no_approvers (the operator has said
// reviewers may be missing here: configured in another process sharing
// the store); the gate then holds such calls as before. Otherwise it is
// not nil, empty when nobody in people reviews.
func (c Config) Reviewers(people []Credential) []approval.Principal {
	if c.Approvals.AllowNoApprovers {
		return nil
	}
	out := []approval.Principal{}
	for _, p := range people {
		reviews := slices.Contains(p.Roles, RoleApprover) || slices.Contains(p.Roles, RoleAdmin)
		if p.Principal.Kind != KindHuman || !reviews {
			continue
		}
		out = append(out, p.Principal)
	}
	return out
}

// MinTokenChars is the length under which ShortTokens warns about a
// token: the same 16 characters below which a secret is too short to look
// for inside an upstream's environment (see UpstreamEnvs).
const MinTokenChars = 16

// ShortTokens returns a warning for every agent and approver token read
// from token_env or token_file (as Tokens reads them) that is shorter than
// MinTokenChars characters: a bearer token that short can be guessed, and
// toolgate does not slow down guessing. Each warning names the principal
// and the variable or file, and the length, never the token. Tokens that
// cannot be read are Tokens' errors, not warnings; token_sha256 says
// nothing of the token's length.
func (c Config) ShortTokens(env Env, readFile func(string) ([]byte, error)) []string {
	var out []string
	check := func(who string, t Token) {
		var v, src string
		switch {
		case t.TokenEnv != "" && env != nil:
			v, _ = env(t.TokenEnv)
			src = "token_env " + t.TokenEnv
		case t.TokenFile != "" && readFile != nil:
			b, err := readFile(t.TokenFile)
			if err != nil {
				return
			}
			v, src = string(bytes.TrimSpace(b)), "token_file "+t.TokenFile
		}
		if n := utf8.RuneCountInString(v); n > 0 && n < MinTokenChars {
			out = append(out, fmt.Sprintf("%s: the token of %s is %d characters long; a bearer token under %d characters can be guessed: use a random one (openssl rand -hex 16 makes 32)", who, src, n, MinTokenChars))
		}
	}
	for i, a := range c.Agents {
		check(fmt.Sprintf("agents[%d] %q", i, a.ID), a.Token)
	}
	for i, a := range c.Approvers {
		check(fmt.Sprintf("approvers[%d] %q", i, a.ID), a.Token)
	}
	return out
}

func (t Token) resolve(env Env, readFile func(string) ([]byte, error)) (string, error) {
	switch {
	case t.TokenEnv != "" && t.TokenFile == "" && t.TokenSHA256 == "":
		v, ok := env(t.TokenEnv)
		if !ok {
			return "", fmt.Errorf("token_env %s is not set: export it in toolgate's environment or correct the name (a random token: openssl rand -hex 16)", t.TokenEnv)
		}
		if v == "" {
			return "", fmt.Errorf("token_env %s is empty: set it to the token (a random one: openssl rand -hex 16)", t.TokenEnv)
		}
		return TokenHash(v), nil
	case t.TokenFile != "" && t.TokenEnv == "" && t.TokenSHA256 == "":
		if readFile == nil {
			return "", fmt.Errorf("token_file %s: no file reader", t.TokenFile)
		}
		b, err := readFile(t.TokenFile)
		if err != nil {
			return "", readError("token_file", t.TokenFile, err)
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			return "", fmt.Errorf("token_file %s is empty: write the token into it (a random one: openssl rand -hex 16)", t.TokenFile)
		}
		return TokenHash(string(b)), nil
	case t.TokenSHA256 != "" && t.TokenEnv == "" && t.TokenFile == "":
		if !sha256RE.MatchString(t.TokenSHA256) {
			return "", errors.New("token_sha256: want 64 hex digits")
		}
		return strings.ToLower(t.TokenSHA256), nil
	}
	return "", errors.New("set exactly one of token_env, token_file or token_sha256")
}

// StdioPrincipal returns the principal of --stdio mode: the agent named by
// stdio.agent, else the first configured agent, else a built-in agent with
// id "stdio".
func (c Config) StdioPrincipal() approval.Principal {
	for _, a := range c.Agents {
		if c.Stdio.Agent == "" || a.ID == c.Stdio.Agent {
			return approval.Principal{ID: a.ID, Kind: KindAgent, Tenant: a.Tenant, Groups: a.Groups, OnBehalfOf: a.OnBehalfOf}
		}
	}
	return approval.Principal{ID: "stdio", Kind: KindAgent}
}

// Files are the contents of the files a config names for tokens and
// secrets, each read once by [Config.ReadFiles]. Pass [Files.ReadFile] as
// the readFile of Tokens, ShortTokens, NotifySecrets, ShortNotifySecrets,
// Secrets and EnvProblems, so that one (re)load reads every file once and
// all of them see the same bytes: those privfile checked on the descriptor
// it read them from. The zero value has read nothing.
type Files struct {
	read map[string]fileRead
}

type fileRead struct {
	b   []byte
	err error
}

// ReadFile returns what ReadFiles read at path: its content, or the error
// (a *privfile.Error for a private file that is missing or not private).
// A path the config does not name was not read and is an error.
func (f Files) ReadFile(path string) ([]byte, error) {
	r, ok := f.read[path]
	if !ok {
		return nil, fmt.Errorf("%s: not one of the config's token or secret files", path)
	}
	return r.b, r.err
}

// ReadFiles reads, once each, the files c names for tokens and secrets.
// Every approver token_file, and every url_file, secret_file and token_file
// of a notification channel, is read with private: it must be private to
// the service user (privfile.Reader: a regular file owned by its Euid
// without group or other bits, at most privfile.MaxBytes, checked on the
// descriptor its bytes are read from, never through a symlink). The rule
// comes from issue 6 ("Out of the agent's reach"): an approver's token
// must not be readable by an agent running as another user (nor a
// notification channel's secret: a Slack signing secret lets its holder
// forge an approval click). Agents' token files are read with readFile
// (nil reads none; serve passes privfile.ReadRegular: a regular file of at
// most privfile.MaxBytes, a FIFO refused rather than waited on) and their
// owner and mode are not checked: an agent may own its own token file. A
// path named both ways is read as private.
func (c Config) ReadFiles(private privfile.Reader, readFile func(string) ([]byte, error)) Files {
	f := Files{read: map[string]fileRead{}}
	for _, p := range c.privateFiles() {
		if _, done := f.read[p]; !done {
			b, err := private.Read(p)
			f.read[p] = fileRead{b, err}
		}
	}
	for _, a := range c.Agents {
		if _, done := f.read[a.TokenFile]; done || a.TokenFile == "" || readFile == nil {
			continue
		}
		b, err := readFile(a.TokenFile)
		f.read[a.TokenFile] = fileRead{b, err}
	}
	return f
}

// privateFiles lists the paths ReadFiles reads with privfile: approvers'
// token files and the notification channels' secret files.
func (c Config) privateFiles() []string {
	var out []string
	for _, a := range c.Approvers {
		if a.TokenFile != "" {
			out = append(out, a.TokenFile)
		}
	}
	return append(out, c.notifyFiles()...)
}

// missingFileFix ends the problem of a secret or token file that does not
// exist: the fix, for an operator who has not made the file yet.
const missingFileFix = ": correct the path, or create the file holding the secret (mode 0600)"

// readError is err, from reading the file at path named by the config key
// key (token_file, secret_file, …), worded with the key and path once: a
// privfile error already starts with the path. A missing file adds the fix.
func readError(key, path string, err error) error {
	var out error
	if pe := (*privfile.Error)(nil); errors.As(err, &pe) {
		out = fmt.Errorf("%s %w", key, err)
	} else {
		out = fmt.Errorf("%s %s: %w", key, path, err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w%s", out, missingFileFix)
	}
	return out
}
