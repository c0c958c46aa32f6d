package config

import (
	"bytes"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// minContained is the shortest secret that a value is refused for merely
// containing (a longer value such as "Bearer <token>" or a DSN holding a
// password). Shorter secrets are matched only by equality, so that a short
// password does not condemn every value that happens to contain it.
const minContained = 16

// Variables that hold a secret of toolgate whatever the config says: the
// toolgate CLI's approver token, and the headers (credentials) of the
// OpenTelemetry trace exporter. PGPASSWORD joins them when storage.driver
// is postgres, since the Postgres driver reads it.
var fixedSecretNames = map[string]string{
	"TOOLGATE_TOKEN":                    "the approver token of the toolgate CLI",
	"OTEL_EXPORTER_OTLP_HEADERS":        "the headers (credentials) of toolgate's trace exporter",
	"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "the headers (credentials) of toolgate's trace exporter",
}

// Secrets is what toolgate holds that no upstream may receive (issue 9): a
// local tool that prints its environment must not hand an agent a token
// that approves its own calls, nor a credential that reaches another
// upstream or the database without the gate. It holds secret values and
// the names of variables that hold them; each comes with a description of
// where it comes from, which error messages use (never the value). Build
// it with [Config.Secrets]. A nil *Secrets holds nothing.
type Secrets struct {
	values map[string]string // secret value → what it is
	names  map[string]string // variable name → what it holds
}

// AddValue records v (ignored when empty) as a secret described by what.
func (s *Secrets) AddValue(v, what string) {
	if v == "" {
		return
	}
	if s.values == nil {
		s.values = map[string]string{}
	}
	if _, ok := s.values[v]; !ok {
		s.values[v] = what
	}
}

// Match reports whether v equals a secret, or contains one of at least 16
// bytes, and if so what that secret is.
func (s *Secrets) Match(v string) (what string, ok bool) {
	if s == nil || v == "" {
		return "", false
	}
	if what, ok := s.values[v]; ok {
		return what, true
	}
	// Sorted, so the same input always names the same secret.
	for _, sec := range slices.Sorted(maps.Keys(s.values)) {
		if len(sec) >= minContained && strings.Contains(v, sec) {
			return s.values[sec], true
		}
	}
	return "", false
}

// isOrHolds says how v, which Match found, relates to the secret: "is"
// when it is the secret, "holds" when it contains one ("Bearer <token>").
func (s *Secrets) isOrHolds(v string) string {
	if _, ok := s.values[v]; ok {
		return "is"
	}
	return "holds"
}

// Name reports whether the variable name holds a secret, and which.
func (s *Secrets) Name(name string) (what string, ok bool) {
	if s == nil {
		return "", false
	}
	what, ok = s.names[name]
	return what, ok
}

// secretNames returns the variables that hold toolgate's secrets according
// to c alone (no environment needed), each with what it holds:
//
//   - every agent's and approver's token_env;
//   - every variable referenced with ${VAR} in storage.dsn or in a value of
//     servers.<name>.headers;
//   - every notification channel's url_env, secret_env and token_env;
//   - TOOLGATE_TOKEN, OTEL_EXPORTER_OTLP_HEADERS and
//     OTEL_EXPORTER_OTLP_TRACES_HEADERS, and PGPASSWORD when storage.driver
//     is postgres.
func (c Config) secretNames() map[string]string {
	names := maps.Clone(fixedSecretNames)
	if c.Storage.Driver == "postgres" {
		names["PGPASSWORD"] = "toolgate's Postgres password (its driver reads PGPASSWORD)"
	}
	for v, where := range c.Refs.Secret {
		names[v] = "a credential of toolgate (referenced by " + where + ")"
	}
	for i, ch := range c.Notify.Channels {
		for _, n := range []struct{ key, name string }{{"url", ch.URLEnv}, {"secret", ch.SecretEnv}, {"token", ch.TokenEnv}} {
			if n.name != "" {
				names[n.name] = fmt.Sprintf("the %s of notify.channels[%d] %q", n.key, i, ch.Name)
			}
		}
	}
	maps.Copy(names, c.tokenEnvNames())
	return names
}

// tokenEnvNames returns the variables that hold tokens, with whose: every
// token_env and TOOLGATE_TOKEN. A server's env: may not set these at all,
// whatever the value.
func (c Config) tokenEnvNames() map[string]string {
	names := map[string]string{"TOOLGATE_TOKEN": fixedSecretNames["TOOLGATE_TOKEN"]}
	for i, a := range c.Agents {
		if a.TokenEnv != "" {
			names[a.TokenEnv] = fmt.Sprintf("the token of agents[%d] %q", i, a.ID)
		}
	}
	for i, a := range c.Approvers {
		if a.TokenEnv != "" {
			names[a.TokenEnv] = fmt.Sprintf("the token of approvers[%d] %q", i, a.ID)
		}
	}
	return names
}

// Secrets collects toolgate's secrets from c, reading variables with env and
// token files with readFile (either may be nil; what cannot be read is left
// out, since Tokens reports it). The names are those of secretNames; the
// values are:
//
//   - every agent's and approver's token (token_env value, token_file
//     contents trimmed of surrounding white space);
//   - storage.dsn and the password in it, when it is set;
//   - every servers.<name>.headers value that references a ${VAR};
//   - every notification channel's URL (which often carries a credential),
//     signing secret and token, from its *_env or *_file, when all of
//     them can be read (else serve refuses to start anyway);
//   - the value of every variable secretNames lists.
//
// serve adds nothing for --dev tokens: they are minted in memory after the
// upstreams' environments are computed and are never in any environment.
func (c Config) Secrets(env Env, readFile func(string) ([]byte, error)) *Secrets {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	s := &Secrets{names: c.secretNames()}
	token := func(who string, t Token) {
		switch {
		case t.TokenEnv != "":
			v, _ := env(t.TokenEnv)
			s.AddValue(v, "the token of "+who)
		case t.TokenFile != "" && readFile != nil:
			if b, err := readFile(t.TokenFile); err == nil {
				s.AddValue(string(bytes.TrimSpace(b)), "the token of "+who)
			}
		}
	}
	for i, a := range c.Agents {
		token(fmt.Sprintf("agents[%d] %q", i, a.ID), a.Token)
	}
	for i, a := range c.Approvers {
		token(fmt.Sprintf("approvers[%d] %q", i, a.ID), a.Token)
	}
	if dsn := c.Storage.DSN; dsn != "" {
		s.AddValue(dsnPassword(dsn), "the password in storage.dsn")
		s.AddValue(dsn, "storage.dsn")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		for key, v := range c.Servers[name].Headers {
			path := "servers." + name + ".headers." + key
			if c.Refs.Headers[path] {
				s.AddValue(v, "the value of "+path)
			}
		}
	}
	if notes, err := c.NotifySecrets(env, readFile); err == nil {
		for i, n := range notes {
			where := fmt.Sprintf("notify.channels[%d] %q", i, c.Notify.Channels[i].Name)
			s.AddValue(n.URL, "the url of "+where)
			s.AddValue(n.Secret, "the secret of "+where)
			s.AddValue(n.Token, "the token of "+where)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.names)) {
		if v, ok := env(name); ok {
			s.AddValue(v, fmt.Sprintf("the value of %s (%s)", name, s.names[name]))
		}
	}
	return s
}

// dsnPassword returns the password in a Postgres connection string, in URL
// form (postgres://user:password@host/db?password=...) or keyword form
// (host=... password='...'), or "" when there is none.
func dsnPassword(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return ""
		}
		if p, ok := u.User.Password(); ok {
			return p
		}
		return u.Query().Get("password")
	}
	// Keyword form: key=value pairs separated by spaces; a value may be
	// single-quoted, with \' and \\ escapes.
	for rest := strings.TrimSpace(dsn); rest != ""; rest = strings.TrimSpace(rest) {
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			return ""
		}
		key = strings.TrimSpace(key)
		after = strings.TrimLeft(after, " ")
		var val strings.Builder
		if strings.HasPrefix(after, "'") {
			i := 1
			for ; i < len(after) && after[i] != '\''; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				val.WriteByte(after[i])
			}
			rest = after[min(i+1, len(after)):]
		} else {
			end := strings.IndexByte(after, ' ')
			if end < 0 {
				end = len(after)
			}
			val.WriteString(after[:end])
			rest = after[end:]
		}
		if key == "password" {
			return val.String()
		}
	}
	return ""
}
