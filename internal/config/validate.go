package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/policy"
)

// MaxServerNameLen is the longest server name: an exposed tool name
// "<server>__<tool>" longer than 64 characters is not exposed, so a longer
// server name could expose nothing.
const MaxServerNameLen = 61

// ReservedServerName cannot name a server; it is kept for toolgate's own
// tools and namespaces.
const ReservedServerName = "toolgate"

// serverNameRE is the shape of a server name (DESIGN "Config keys"). It
// admits no '_', so the "__" separator of exposed names is unambiguous.
var serverNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

var validRoles = []string{RoleViewer, RoleApprover, RoleAdmin, RoleHost}

// Validate reports every problem in c at once, joined with errors.Join, or
// nil. Each problem starts with the key path it is about
// ("servers.fs.url: ..."). It checks: listen addresses (host:port; admin
// may also be "" or unix:///absolute/path); storage driver sqlite (with
// path) or postgres (with dsn), max_conns >= 1 (the other driver's key is
// ignored, so one file can switch drivers through ${VAR}); server names,
// exactly one of command or url, url http(s) with a host, no stdio fields
// on an HTTP server or headers on a stdio one, call_timeout >= 0, a stdio
// server's env and env_passthrough (no token variable set in env, no
// variable holding a secret passed through or referenced; see
// validateServerEnv); agent and
// approver ids unique across both lists, exactly one token source each,
// token_sha256 of 64 hex digits, approver roles; approval limits and redact
// patterns; stdio.agent naming an agent; the policy (its errors prefixed
// "policy."), and policy rules naming a server that is not configured
// (glob server patterns are not checked; see Warnings).
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// listen
	if c.Listen.MCP == "" {
		add("listen.mcp: required (host:port)")
	} else if err := checkHostPort(c.Listen.MCP); err != nil {
		add("listen.mcp %q: %w", c.Listen.MCP, err)
	}
	if a := c.Listen.Admin; a != "" {
		if p, ok := strings.CutPrefix(a, "unix://"); ok {
			switch {
			case !filepath.IsAbs(p):
				add("listen.admin %q: socket path %q is relative; want unix:///absolute/dir/name.sock", a, p)
			case filepath.Clean(p) != p:
				add("listen.admin %q: want unix:///absolute/clean/path.sock", a)
			}
		} else if err := checkHostPort(a); err != nil {
			add("listen.admin %q: %w (or unix:///absolute/path.sock, or \"\" for none)", a, err)
		} else if a == c.Listen.MCP && !strings.HasSuffix(a, ":0") {
			add("listen.admin %q: same address as listen.mcp", a)
		}
	}

	if c.Listen.MaxConnsMCP < 0 {
		add("listen.max_conns_mcp %d: must be >= 0 (0 derives it from the descriptor limit)", c.Listen.MaxConnsMCP)
	}
	if c.Listen.MaxConnsAdmin < 0 {
		add("listen.max_conns_admin %d: must be >= 0 (0 derives it from the descriptor limit)", c.Listen.MaxConnsAdmin)
	}
	if c.Listen.ReadHeaderTimeout <= 0 {
		add("listen.read_header_timeout %s: must be > 0", c.Listen.ReadHeaderTimeout)
	}
	if c.Listen.IdleTimeout <= 0 {
		add("listen.idle_timeout %s: must be > 0", c.Listen.IdleTimeout)
	}

	// storage
	s := c.Storage
	switch s.Driver {
	case "sqlite":
		if s.Path == "" {
			add("storage.path: required for driver sqlite")
		}
	case "postgres":
		if s.DSN == "" {
			add("storage.dsn: required for driver postgres (e.g. ${DATABASE_URL})")
		}
	default:
		add("storage.driver %q: want sqlite or postgres", s.Driver)
	}
	if s.MaxConns < 1 {
		add("storage.max_conns %d: must be >= 1", s.MaxConns)
	}
	if s.Poll <= 0 {
		add("storage.poll %s: must be > 0", s.Poll)
	}

	// servers
	secretNames, tokenNames := c.secretNames(), c.tokenEnvNames()
	for _, name := range slices.Sorted(maps.Keys(c.Servers)) {
		errs = append(errs, validateServer(name, c.Servers[name])...)
		if c.Servers[name].Command != "" {
			errs = append(errs, c.validateServerEnv(name, c.Servers[name], secretNames, tokenNames)...)
		}
	}

	// principals
	owner := map[string]string{} // id → where it was first defined
	checkID := func(where, id string) {
		switch {
		case id == "":
			add("%s.id: required", where)
		case strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			add("%s.id %q: must not contain spaces or control characters", where, id)
		case strings.HasPrefix(id, policy.GroupPrefix):
			add("%s.id %q: must not start with %q, which marks groups in approvers lists", where, id, policy.GroupPrefix)
		default:
			if prev, dup := owner[id]; dup {
				add("%s.id %q: also used by %s (ids are unique across agents and approvers)", where, id, prev)
			} else {
				owner[id] = where
			}
		}
	}
	for i, a := range c.Agents {
		where := fmt.Sprintf("agents[%d]", i)
		checkID(where, a.ID)
		errs = append(errs, a.validate(where)...)
		errs = append(errs, validateGroups(where, a.Groups)...)
	}
	slackOwner := map[string]string{} // slack_user_id → where it was first defined
	for i, a := range c.Approvers {
		where := fmt.Sprintf("approvers[%d]", i)
		checkID(where, a.ID)
		errs = append(errs, a.validate(where)...)
		errs = append(errs, validateGroups(where, a.Groups)...)
		if len(a.Roles) == 0 {
			add("%s.roles: required (any of %s)", where, strings.Join(validRoles, ", "))
		}
		for k, r := range a.Roles {
			if !slices.Contains(validRoles, r) {
				add("%s.roles[%d] %q: want one of %s", where, k, r, strings.Join(validRoles, ", "))
			}
		}
		if u := a.SlackUserID; u != "" {
			if !slackUserRE.MatchString(u) {
				add("%s.slack_user_id %q: want a Slack user id: U or W, then at least two upper-case letters or digits (U024BE7LH)", where, u)
			} else if prev, dup := slackOwner[u]; dup {
				add("%s.slack_user_id %q: also used by %s", where, u, prev)
			} else {
				slackOwner[u] = where
			}
		}
	}

	// approvals
	ap := c.Approvals
	if ap.KeepAlive <= 0 {
		add("approvals.keepalive %s: must be > 0", ap.KeepAlive)
	}
	if ap.MaxPendingPerPrincipal < 1 {
		add("approvals.max_pending_per_principal %d: must be >= 1", ap.MaxPendingPerPrincipal)
	}
	if ap.MaxPending < 1 {
		add("approvals.max_pending %d: must be >= 1", ap.MaxPending)
	}
	if ap.RetryWait < 0 {
		add("approvals.retry_wait %s: must be >= 0", ap.RetryWait)
	}
	if ap.MaxHold < 0 {
		add("approvals.max_hold %s: must be >= 0 (0 holds until decided)", ap.MaxHold)
	}
	if ap.ResultMaxBytes < 1024 {
		add("approvals.result_max_bytes %s: must be at least 1KiB", ap.ResultMaxBytes)
	}
	if ap.ResultTTL < time.Second {
		add("approvals.result_ttl %s: must be at least 1s", ap.ResultTTL)
	}
	if ap.Lease < 30*time.Millisecond {
		add("approvals.lease %s: must be at least 30ms", ap.Lease)
	}
	for _, r := range []struct {
		key string
		d   time.Duration
	}{{"retention.requests", c.Retention.Requests}, {"retention.events", c.Retention.Events}, {"retention.sessions", c.Retention.Sessions}} {
		if r.d < 0 {
			add("%s %s: must be >= 0 (0 keeps everything)", r.key, r.d)
		}
	}
	if ap.SweepInterval <= 0 {
		add("approvals.sweep_interval %s: must be > 0", ap.SweepInterval)
	}
	for k, key := range ap.Redact.Keys {
		if strings.TrimSpace(key) == "" {
			add("approvals.redact.keys[%d]: empty", k)
		}
	}
	for k, p := range ap.Redact.Patterns {
		if p == "" {
			add("approvals.redact.patterns[%d]: empty", k)
		} else if re, err := regexp.Compile(p); err != nil {
			add("approvals.redact.patterns[%d]: %w", k, err)
		} else if re.MatchString("") {
			// It would mark every string value and key at every
			// character: the reviewer would read nothing (attack31).
			add("approvals.redact.patterns[%d] %q: matches the empty string, so it would hide every string and key between every character; make it match at least one character (+ for *)", k, p)
		} else if emptyMatch(p) {
			// `\b` matches no "" but an empty stretch between two
			// characters: markers that hide nothing (fixes32).
			add("approvals.redact.patterns[%d] %q: can match an empty stretch between two characters (as \\b does), so it would insert markers that hide nothing; make every alternative match at least one character", k, p)
		}
	}

	if u := ap.PublicURL; u != "" {
		if pu, err := url.Parse(u); err == nil && pu.User != nil {
			add("approvals.public_url: must not hold user information") // nor echo a password
		} else if err := checkHTTPURL(u); err != nil {
			add("approvals.public_url %q: %w", u, err)
		} else if pu, _ := url.Parse(u); pu.RawQuery != "" || pu.Fragment != "" {
			add("approvals.public_url %q: must not have a query or fragment", u)
		}
	}

	// stdio
	if id := c.Stdio.Agent; id != "" && !slices.ContainsFunc(c.Agents, func(a Agent) bool { return a.ID == id }) {
		add("stdio.agent %q: no agent has this id", id)
	}

	errs = append(errs, c.Sessions.validate()...)
	errs = append(errs, c.Notify.validate(c)...)
	errs = append(errs, c.Web.validate()...)
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.Upstreams.validate()...)
	errs = append(errs, c.Grants.validate()...)
	errs = append(errs, c.Audit.validate()...)

	// policy
	if src := c.Policy.Source; src != "" && src != policy.SourceFile && src != policy.SourceStore {
		add("policy.source %q: want file or store", src)
	}
	for _, err := range c.Policy.Validate() {
		errs = append(errs, fmt.Errorf("policy.%w", err))
	}
	for i, r := range c.Policy.Rules {
		if r.Server == "" || policy.IsGlob(r.Server) {
			continue
		}
		if _, ok := c.Servers[r.Server]; !ok {
			add("policy.%s: %s", ruleLabel(&c.Policy, i), c.unknownServer(r.Server))
		}
	}
	return errors.Join(errs...)
}

// unknownServer is the problem of a server name that servers: does not
// hold, with the names it does hold, sorted (a typo is then plain to see).
func (c Config) unknownServer(name string) string {
	if len(c.Servers) == 0 {
		return fmt.Sprintf("server %q is not configured (servers: is empty)", name)
	}
	return fmt.Sprintf("server %q is not configured (servers: %s)", name, strings.Join(slices.Sorted(maps.Keys(c.Servers)), ", "))
}

func validateServer(name string, s Server) []error {
	var errs []error
	where := "servers." + name
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(where+format, args...)) }
	switch {
	case !serverNameRE.MatchString(name):
		add(": name must match %s (lowercase letters, digits and '-')", serverNameRE)
	case strings.Contains(name, "__"):
		add(`: name must not contain "__", the separator of exposed tool names`)
	case name == ReservedServerName:
		add(": name %q is reserved", ReservedServerName)
	case len(name) > MaxServerNameLen:
		add(": name is %d characters, at most %d (exposed names <server>__<tool> are at most 64)", len(name), MaxServerNameLen)
	}
	switch {
	case s.Command == "" && s.URL == "":
		add(": set one of command (stdio) or url (Streamable HTTP)")
	case s.Command != "" && s.URL != "":
		add(": set only one of command or url")
	case s.URL != "":
		u, err := url.Parse(s.URL)
		switch {
		case err != nil:
			// url.Parse errors quote the URL, which may hold a secret.
			add(".url: does not parse")
		case u.Scheme != "http" && u.Scheme != "https":
			add(".url: scheme %q, want http or https", u.Scheme)
		case u.Host == "":
			add(".url: no host")
		}
		if len(s.Args) > 0 || len(s.Env) > 0 || len(s.EnvPassthrough) > 0 || s.Dir != "" {
			add(": args, env, env_passthrough and dir are only for command (stdio) servers")
		}
	case s.Command != "":
		if len(s.Headers) > 0 {
			add(".headers: only for url (HTTP) servers")
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			add(".env: bad variable name %q", k)
		}
	}
	for k, v := range s.Headers {
		if !headerToken(k) {
			add(".headers: bad header name %q", k)
		}
		// The value is not quoted: it may be a secret. net/http refuses
		// a request with such a value (toolgate's lean exchange too), so
		// every call would fail (branch attack15).
		if strings.ContainsFunc(v, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
			add(".headers.%s: the value has a control character (a line break, NUL, escape or DEL), which HTTP does not allow; a value from ${VAR} or a file must not end with a newline", k)
		}
	}
	if s.CallTimeout < 0 {
		add(".call_timeout %s: must be >= 0 (0 means no limit)", s.CallTimeout)
	}
	if s.ConnectTimeout < 0 {
		add(".connect_timeout %s: must be >= 0 (0 means the default, 30s)", s.ConnectTimeout)
	}
	if s.Sessions != "" && s.Sessions != "shared" && s.Sessions != "per_agent" {
		add(".sessions %q: want shared or per_agent", s.Sessions)
	}
	for i, c := range s.ClientCapabilities {
		if c != "roots" && c != "sampling" && c != "elicitation" {
			add(".client_capabilities[%d] %q: want roots, sampling or elicitation", i, c)
		}
	}
	return errs
}

func (t Token) validate(where string) []error {
	var errs []error
	n := 0
	for _, v := range []string{t.TokenEnv, t.TokenFile, t.TokenSHA256} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		errs = append(errs, fmt.Errorf("%s: set exactly one of token_env, token_file or token_sha256 (found %d)", where, n))
	}
	if t.TokenEnv != "" && !validVarName(t.TokenEnv) {
		errs = append(errs, fmt.Errorf("%s.token_env %q: not a variable name", where, t.TokenEnv))
	}
	if t.TokenSHA256 != "" && !sha256RE.MatchString(t.TokenSHA256) {
		// Do not echo the value: someone may have pasted the token itself.
		errs = append(errs, fmt.Errorf("%s.token_sha256: want 64 hex digits (the SHA-256 of the token), got %d characters", where, len(t.TokenSHA256)))
	}
	return errs
}

func validateGroups(where string, groups []string) []error {
	var errs []error
	for k, g := range groups {
		if strings.TrimSpace(g) == "" || strings.TrimSpace(g) != g {
			errs = append(errs, fmt.Errorf("%s.groups[%d] %q: empty or padded with spaces", where, k, g))
		}
	}
	return errs
}

// checkHostPort checks a host:port listen address; the host may be empty
// (all interfaces) and the port 0 (any free port).
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number 0-65535", port)
	}
	return nil
}

// ruleLabel names policy rule i as policy.Validate does: rules[2] or
// rules[2] "name".
func ruleLabel(p *policy.Policy, i int) string {
	if n := p.Rules[i].Name; n != "" {
		return fmt.Sprintf("rules[%d] %q", i, n)
	}
	return fmt.Sprintf("rules[%d]", i)
}

// headerToken reports whether s is an HTTP header name (a token, RFC 9110
// §5.1: letters, digits and !#$%&'*+-.^_`|~), as net/http's Transport
// requires of every request's header names.
func headerToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			return false
		}
		return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
	})
}
