package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/policy"
)

// Env looks up an environment variable, like os.LookupEnv. cmd passes
// os.LookupEnv; tests pass a map's lookup. A nil Env has no variables.
type Env func(name string) (string, bool)

// MapEnv returns an Env that looks names up in m.
func MapEnv(m map[string]string) Env {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// Config is the whole toolgate configuration file. Field names are the
// YAML keys listed in DESIGN "Config keys". Relative paths (storage.path,
// token_file, a server's dir) are relative to the working directory of the
// process, not to the config file.
type Config struct {
	Listen  Listen  `yaml:"listen"`
	Storage Storage `yaml:"storage"`
	// Servers maps a server name to how to reach it. Names match
	// ^[a-z0-9][a-z0-9-]*$, are at most MaxServerNameLen long, and
	// "toolgate" is reserved.
	Servers   map[string]Server `yaml:"servers,omitempty"`
	Agents    []Agent           `yaml:"agents,omitempty"`
	Approvers []Approver        `yaml:"approvers,omitempty"`
	Approvals Approvals         `yaml:"approvals"`
	Stdio     Stdio             `yaml:"stdio"`
	Policy    policy.Policy     `yaml:"policy"`
	Sessions  Sessions          `yaml:"sessions"`
	Notify    Notify            `yaml:"notify"`
	Web       Web               `yaml:"web"`
	Retention Retention         `yaml:"retention"`
	Grants    Grants            `yaml:"grants"`
	Audit     Audit             `yaml:"audit"`

	// Refs records which ${VAR}s the file referenced where secrets live;
	// Load fills it. It is not a key of the file.
	Refs      VarRefs   `yaml:"-"`
	Limits    Limits    `yaml:"limits"`
	Upstreams Upstreams `yaml:"upstreams"`
}

// Retention says how long finished records stay in the store before the
// gateway prunes them (hourly); 0 keeps them forever. A request that is
// not finished (pending, approved, or dispatched without a recorded
// outcome) and its events are never pruned, nor a session that is not
// revoked. Events go oldest first, as a whole prefix of the log, and the
// store records where the pruned prefix ends (see store.Retention).
type Retention struct {
	// Requests: a finished request, once created this long ago and its
	// events are gone.
	Requests time.Duration `yaml:"requests"`
	// Events: events older than this, up to the first one of an
	// unfinished request.
	Events time.Duration `yaml:"events"`
	// Sessions: a revoked session, once revoked this long ago, its events
	// are gone and it has no child left.
	Sessions time.Duration `yaml:"sessions"`
}

// Listen holds the listener addresses.
type Listen struct {
	// MCP is the host:port of the agent-side Streamable HTTP listener
	// (path /mcp). Port 0 picks a free port.
	MCP string `yaml:"mcp"`
	// Admin is the host:port of the approver-side listener (admin API,
	// /metrics), or unix:///absolute/path.sock, or "" for none.
	Admin string `yaml:"admin"`
	// AdminSet is true when the file sets listen.admin explicitly; a
	// --stdio gateway opens the admin listener only then.
	AdminSet bool `yaml:"-"`
	// MaxConnsMCP and MaxConnsAdmin cap the open connections of each
	// listener; 0 (the default) lets serve derive the caps from the
	// process's descriptor limit (docs/configuration.md, listen.max_conns_*). At the cap,
	// the connection that has been idle (or has sent nothing) the longest
	// is closed to make room; when every connection carries a request, the
	// new one is answered 503 and closed.
	MaxConnsMCP   int `yaml:"max_conns_mcp"`
	MaxConnsAdmin int `yaml:"max_conns_admin"`
	// ReadHeaderTimeout bounds the time from a request's first byte to the
	// end of its headers (the first request's too; a connection that sends
	// nothing is closed after IdleTimeout).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// IdleTimeout closes a connection that has carried no request for
	// this long (keep-alive, or new and silent).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// Storage selects and configures the store backend.
type Storage struct {
	// Driver is "sqlite" or "postgres".
	Driver string `yaml:"driver"`
	// Path is the SQLite database file (sqlite only).
	Path string `yaml:"path"`
	// DSN is the Postgres connection string (postgres only); write it as
	// ${DATABASE_URL} rather than inline.
	DSN string `yaml:"dsn,omitempty"`
	// MaxConns caps the Postgres connection pool; at least 1. Each
	// instance opens 5 more outside it (LISTEN, lease renewals, two for
	// admin reads, notifications; see sqlstore.Config.MaxConns).
	MaxConns int `yaml:"max_conns"`
	// Poll is the safety poll of cross-instance wake-ups (postgres): the
	// change feed is read at least this often, so a missed notification
	// costs at most this long.
	Poll time.Duration `yaml:"poll"`
}

// Server is one upstream MCP server: exactly one of Command (stdio) or URL
// (Streamable HTTP).
type Server struct {
	// Command, Args, Env and Dir start a stdio server. The server does not
	// inherit toolgate's environment: it gets the variables of BaseEnv
	// that are set, the ones EnvPassthrough names, and Env (which wins);
	// see Config.UpstreamEnv.
	Command string            `yaml:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty"`
	// EnvPassthrough names more variables of toolgate's environment to
	// pass to the server (when set). A name that holds one of toolgate's
	// secrets is refused (see Secrets).
	EnvPassthrough []string `yaml:"env_passthrough,omitempty"`
	Dir            string   `yaml:"dir,omitempty"`
	// URL and Headers reach a Streamable HTTP server (http or https).
	URL     string            `yaml:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty"`
	// CallTimeout bounds one dispatched call upstream (not the time it is
	// held for approval); 0 means no limit.
	CallTimeout time.Duration `yaml:"call_timeout,omitempty"`
	// ConnectTimeout bounds starting this server and its initialize
	// handshake (and each reconnect); 0 means the default, 30s. A server
	// fetched on first start (npx -y) may need longer.
	ConnectTimeout time.Duration `yaml:"connect_timeout,omitempty"`
	// ToolPrefix, when false, exposes the server's tools (and prompts)
	// under their own names instead of "<server>__<tool>"; a tool name
	// another server already exposes is a startup error. Default true.
	ToolPrefix *bool `yaml:"tool_prefix,omitempty"`
	// TrustAnnotations lets policy rules and conditions use the annotation
	// hints (readOnlyHint, destructiveHint, ...) this server declares for
	// its tools. Default false: the hints are the server's own claims, so
	// annotation selectors treat its tools as unknown (the strictest
	// reading).
	TrustAnnotations bool `yaml:"trust_annotations,omitempty"`
	// Required, when true (the default), makes /readyz answer 503 while
	// this server is not connected; false lists its state without
	// affecting readiness.
	Required *bool `yaml:"required,omitempty"`
	// Sessions is "shared" (one upstream session for all agents) or
	// "per_agent" (one per agent session; for stdio one process each).
	// Empty: per_agent for command servers, shared for url servers.
	Sessions string `yaml:"sessions,omitempty"`
	// ClientCapabilities lists the client capabilities toolgate declares to
	// the server (roots, sampling, elicitation); absent means all three.
	ClientCapabilities []string `yaml:"client_capabilities,omitempty"`
}

// IsRequired reports whether s is required for readiness (Required, default
// true).
func (s Server) IsRequired() bool { return s.Required == nil || *s.Required }

// Token names where a principal's bearer token comes from: exactly one of
// an environment variable, a file (its contents, whitespace trimmed), or
// the token's SHA-256 as 64 hex digits.
type Token struct {
	TokenEnv    string `yaml:"token_env,omitempty"`
	TokenFile   string `yaml:"token_file,omitempty"`
	TokenSHA256 string `yaml:"token_sha256,omitempty"`
}

// Agent is a principal that calls tools.
type Agent struct {
	ID    string `yaml:"id"`
	Token `yaml:",inline"`
	// OnBehalfOf names the person the agent acts for; that person can never
	// review the agent's calls.
	OnBehalfOf string   `yaml:"on_behalf_of,omitempty"`
	Tenant     string   `yaml:"tenant,omitempty"`
	Groups     []string `yaml:"groups,omitempty"`
}

// Roles of an approver; see DESIGN "Roles".
const (
	RoleViewer   = "viewer"
	RoleApprover = "approver"
	RoleAdmin    = "admin"
	RoleHost     = "host"
)

// Approver is a human principal that reads and reviews approvals.
type Approver struct {
	ID    string `yaml:"id"`
	Token `yaml:",inline"`
	// Roles are viewer, approver, admin and host; at least one.
	Roles  []string `yaml:"roles"`
	Groups []string `yaml:"groups,omitempty"`
	Tenant string   `yaml:"tenant,omitempty"`
	// SlackUserID is the approver's Slack user id (U…): a click on a Slack
	// approval button by this user counts as this approver's review, where
	// the request's rule allows chat approval. Unique across approvers.
	SlackUserID string `yaml:"slack_user_id,omitempty"`
}

// Approvals tunes the gate.
type Approvals struct {
	// KeepAlive is the interval of progress keep-alives while a call is held.
	KeepAlive time.Duration `yaml:"keepalive"`
	// MaxPendingPerPrincipal and MaxPending cap pending requests, per
	// calling principal and in total.
	MaxPendingPerPrincipal int `yaml:"max_pending_per_principal"`
	MaxPending             int `yaml:"max_pending"`
	// RetryWait is how long a call in retry mode may wait for a decision
	// before it returns "approval required"; 0 returns at once.
	RetryWait time.Duration `yaml:"retry_wait"`
	// MaxHold bounds how long a held call whose caller cannot be kept
	// waiting (no progress token) is held: then it is answered with an
	// isError result naming the pending approval, its inbox link and how
	// to continue (re-send the identical call), and the approval stays
	// pending. Default 50s, below the 60 s request timeout of common MCP
	// clients; 0 holds such calls until they are decided or expire.
	MaxHold time.Duration `yaml:"max_hold"`
	// ResultMaxBytes bounds a result the result ledger keeps of a consumed
	// approval (returned by tasks/get and to a re-send naming the approval
	// instead of a second run); a larger one is kept as a stand-in marked
	// truncated. Default 1MiB.
	ResultMaxBytes ByteSize `yaml:"result_max_bytes"`
	// ResultTTL is how long the ledger keeps such a result (and a finished
	// task stays readable). Default 1h.
	ResultTTL time.Duration `yaml:"result_ttl"`
	// AllowNoApprovers, when false (the default), refuses at once a call
	// whose policy decision leaves no eligible approver
	// (policy.Decision.NoEligibleApprovers). The gate defines what true does.
	AllowNoApprovers bool `yaml:"allow_no_approvers"`
	// SweepInterval is how often overdue pending requests are expired.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// Lease is how long a held call's claim on its request lasts unless
	// renewed (every Lease/3). After a caller drops or a process dies, an
	// identical re-send takes the request over once the lease lapses.
	Lease  time.Duration `yaml:"lease"`
	Redact Redact        `yaml:"redact"`
	// PublicURL is the external base URL of the admin listener, where
	// approvers open the web inbox (scheme, host and an optional path
	// prefix; no query, fragment or user; e.g. https://toolgate.example.com).
	// When set, notifications link to <PublicURL>/ui/approvals/<id>, held
	// and retry-mode calls name that link, and the inbox's session cookie is
	// Secure when it is https. "" names no link.
	PublicURL string `yaml:"public_url,omitempty"`
}

// Redact adds to the built-in redaction of argument display copies.
type Redact struct {
	// Keys are argument key names (at any depth) whose values are secret.
	Keys []string `yaml:"keys,omitempty"`
	// Patterns are Go regular expressions (regexp/syntax) matching secret
	// string values.
	Patterns []string `yaml:"patterns,omitempty"`
}

// Stdio configures --stdio mode.
type Stdio struct {
	// Agent is the id of the configured agent used as the principal of
	// --stdio; empty means the first agent, or a built-in "stdio" agent when
	// none is configured (see Config.StdioPrincipal).
	Agent string `yaml:"agent,omitempty"`
}

// Default returns the configuration used for every key the file leaves
// out: listeners on 127.0.0.1:7070 (MCP) and 127.0.0.1:7071 (admin), SQLite
// at ./data/toolgate.db, the approval limits of DESIGN, and a policy read
// from the file (source: file) whose default is approve with {timeout: 5m,
// mode: hold, approvals: 1, valid_for: 10m}.
func Default() Config {
	return Config{
		Listen: Listen{MCP: "127.0.0.1:7070", Admin: "127.0.0.1:7071",
			ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second},
		Storage: Storage{Driver: "sqlite", Path: "./data/toolgate.db", MaxConns: 10, Poll: 5 * time.Second},
		Approvals: Approvals{
			KeepAlive:              15 * time.Second,
			MaxPendingPerPrincipal: 32,
			MaxPending:             10000,
			RetryWait:              20 * time.Second,
			MaxHold:                50 * time.Second,
			ResultMaxBytes:         1 << 20,
			ResultTTL:              time.Hour,
			SweepInterval:          time.Second,
			Lease:                  15 * time.Second,
		},
		Sessions:  defaultSessions(),
		Notify:    defaultNotify(),
		Limits:    defaultLimits(),
		Upstreams: defaultUpstreams(),
		Retention: Retention{
			Requests: 90 * 24 * time.Hour,
			Events:   90 * 24 * time.Hour,
			Sessions: 90 * 24 * time.Hour,
		},
		Grants: defaultGrants(),
		Web:    defaultWeb(),
		Audit:  defaultAudit(),
		Policy: policy.Policy{
			Source:  policy.SourceFile,
			Default: policy.Approve,
			Approval: policy.Approval{
				Timeout:   5 * time.Minute,
				Mode:      policy.ModeHold,
				Approvals: 1,
				ValidFor:  10 * time.Minute,
			},
		},
	}
}

// Load reads one YAML document from r over Default(), expands ${VAR} and
// ${VAR:-default} in scalar values with env (see expand), and validates the
// result. Keys absent from the file keep their default; a key written with
// an empty value (e.g. "approvals:") also keeps the defaults of a section.
//
// The error joins every problem found (use errors.Join's Unwrap() []error
// to list them): YAML syntax errors, unknown keys, type errors and unset
// variables, each with its line ("line 12: ..."); if parsing succeeds, the
// errors of Validate. On a validation error Load still returns the decoded
// Config; on a parse error it returns the zero Config.
func Load(r io.Reader, env Env) (Config, error) {
	cfg, root, errs, err := parseAll(r, env)
	if err != nil {
		return Config{}, err
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(withLines(root, errs)...)
	}
	return cfg, errors.Join(withLines(root, append(zeroErrors(root), cfg.Validate()))...)
}

// LoadFile is Load on the file at path; its error names the file in each
// problem, one a line, as "path:12: msg", or "path: msg" when it names no
// line (see AtFile), and a file it cannot open as "path: no such file or
// directory" (fileOpenError; errors.Is finds fs.ErrNotExist and the like).
// Every config error a user can hit starts the same way: serve prints it
// after "invalid config: " (branch ends40; before, a parse error came
// after a "load config:" line of its own, and preflight's without).
func LoadFile(path string, env Env) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fileOpenError(path, err)
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	cfg, err := Load(f, env)
	if err != nil {
		return cfg, AtFile(path, err)
	}
	return cfg, nil
}

// fileOpenError is os.Open's err for the config file path, as "path:
// reason" (the reason wrapped: fs.ErrNotExist and the like still match).
func fileOpenError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", path, pe.Err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// parse is parseAll with its problems joined (the decoded Config only when
// there are none), without validating.
func parse(r io.Reader, env Env) (Config, error) {
	cfg, root, errs, err := parseAll(r, env)
	if err != nil {
		return Config{}, err
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(withLines(root, errs)...)
	}
	return cfg, nil
}

// parseAll reads and decodes the document as far as it can: a YAML syntax
// error is returned as err (nothing else can be checked), while unknown
// keys, unset variables and type errors are collected in errs and the
// rest of the document is still decoded, so a caller (Check) can go on to
// validate it and report every problem at once.
func parseAll(r io.Reader, env Env) (Config, *yaml.Node, []error, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, nil, nil, fmt.Errorf("read config: %w", err)
	}
	cfg := Default()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return cfg, nil, nil, nil // an empty file is all defaults
		}
		return Config{}, nil, nil, syntaxError(err, data)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return Config{}, nil, nil, syntaxError(err, data)
		}
		return Config{}, nil, nil, fmt.Errorf("line %d: a config file holds one YAML document", extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return cfg, nil, nil, nil // a file of comments only
	}
	if root.Kind != yaml.MappingNode {
		return Config{}, nil, nil, fmt.Errorf("line %d: the config must be a mapping of keys to values", root.Line)
	}
	var errs []error
	refs := collectRefs(root) // before expansion replaces the ${VAR}s
	errs = append(errs, expandTree(root, env)...)
	errs = append(errs, checkKeys(root, cfgType, "")...)
	// Decoding ignores unknown keys and goes on past type errors, so what
	// can be decoded is, for Check to validate.
	const unset = "\x00unset"
	cfg.Listen.Admin = unset
	err = root.Decode(&cfg)
	cfg.Refs = refs
	if cfg.Listen.Admin == unset {
		cfg.Listen.Admin = Default().Listen.Admin
	} else {
		cfg.Listen.AdminSet = true
	}
	if err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return Config{}, nil, nil, err
		}
		for _, e := range te.Errors {
			errs = append(errs, errors.New(e))
		}
	}
	return cfg, root, errs, nil
}

// syntaxError drops the "yaml: " prefix of go-yaml's syntax errors, which
// already name the line, and adds a hint for those that do not say what
// is wrong in words a YAML beginner knows (see syntaxHint).
func syntaxError(err error, data []byte) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "yaml: "); ok {
		return fmt.Errorf("%s%s", rest, syntaxHint(rest, data))
	}
	return err
}

// syntaxHint is a hint for go-yaml syntax error msg ("line N: ...") in
// data: a tab that indents line N (go-yaml: "found character that cannot
// start any token"; YAML indents with spaces only), or a line indented
// differently from the keys beside it in the block that starts at line N
// (go-yaml: "did not find expected key", naming the block's first line, not
// the line that is off), or a key more indented than the value before it
// (go-yaml: "mapping values are not allowed in this context"). "" otherwise.
func syntaxHint(msg string, data []byte) string {
	var n int
	if _, err := fmt.Sscanf(msg, "line %d:", &n); err != nil || n < 1 {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	switch {
	case strings.Contains(msg, "cannot start any token") && n <= len(lines) && strings.Contains(lines[n-1], "\t"):
		return " (a tab: YAML indents with spaces only)"
	case strings.Contains(msg, "mapping values are not allowed in this context"):
		return " (a \"key:\" indented under a value: indent it like the keys beside it, or quote a value that holds \": \")"
	case strings.Contains(msg, "did not find expected key"):
		return fmt.Sprintf(" (in the block that starts on line %d a line is indented more or less than the keys beside it, or a list item's \"- \" is missing or extra)", n)
	}
	return ""
}
