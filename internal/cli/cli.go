// Package cli implements `toolgate approvals list|show|approve|deny|watch` (with
// `approve --grant` to remember an approval as a grant) and `toolgate grants
// list|show|revoke`: thin clients of the admin REST API (internal/api). They
// never open the store.
//
// Everything the server sends is printed with hidden characters (controls,
// bidi, zero-width; see api.IsHidden) as visible \u escapes, and show puts
// the request's display warnings in a WARNING block first (case C15). Short
// ids are resolved through ?id_prefix= and ?id_suffix=. watch follows the
// event stream (GET /v1/events/stream) and reconnects with Last-Event-ID. deny requires --reason, because the
// agent reads it; the API itself accepts a deny without one.
package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/store"
)

// Exit codes of Run (DESIGN "CLI").
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Defaults and environment variables for the connection flags.
const (
	DefaultAddr = "http://127.0.0.1:7071"
	EnvAddr     = "TOOLGATE_ADDR"
	EnvToken    = "TOOLGATE_TOKEN"
)

const usageText = `Usage: toolgate approvals <command> [flags]

Commands:
  list [--state S] [--limit N] [--cursor C]
        List approvals: id, state, server, tool (the real names rules
        match; "prompt NAME" or "resource URI" for a prompts/get or
        resources/read), requester, time left and the arguments (the
        display copy on one line, cut at 60 characters, after "!" when
        show has display warnings; read them whole with show before you
        approve).
        --state is pending (default), all, approved, denied, expired,
        cancelled, consumed or invalidated.
  show <id>
        Show one approval in full, with any display warnings first.
  approve <id> [--reason R] [--hash sha256:...]
          [--grant D [--grant-uses N] [--grant-when CEL]]
        Approve. --hash pins the arguments hash you reviewed (from show);
        the approval is refused if the request's hash differs.
        --grant also remembers it: the requester may call this server's
        tool again without asking, for D (e.g. 1h; at most the server's
        grants.max_ttl), at most N times (default: no cap), for arguments
        matching CEL (default: any). A rule needing several approvals
        gets a grant only when that many approvers attach the same one.
        See "toolgate grants --help".
  deny <id> --reason R
        Deny. The reason is required: the agent reads it.
  watch [--since CURSOR]
        Print requests and decisions as they happen, one line each: time,
        event, approval id, "server · tool" as list names them, details
        (with --json, each event's JSON), until interrupted. A dropped connection
        is reopened where it stopped. --since starts after the event with
        that cursor (<tx>.<seq>, each event's "cursor" in --json), or with
        0 at the start of the log, instead of with new events only; a
        cursor that is not of this gateway's log (from another store) is
        refused.

Flags for every command (before or after the arguments):
  --addr A    admin API address: http://host:port, https://host:port,
              host:port or unix:///abs/path.sock
              (default $TOOLGATE_ADDR, else ` + DefaultAddr + `)
  --token T   bearer token (default $TOOLGATE_TOKEN; required)
  --json      print the server's JSON instead of text

<id> is a full approval id, or a part of at least 6 characters of its
start or end that matches exactly one approval (ids made close together
share their start; their ends are random).

Exit status: 0 ok, 1 failure (including errors from the server), 2 usage.
`

// Usage writes the help text of `toolgate approvals` to w.
func Usage(w io.Writer) { _, _ = io.WriteString(w, usageText) }

// options holds every flag; each command registers the ones it takes.
type options struct {
	addr, token string
	json        bool
	state       string
	limit       int
	cursor      string
	oldest      bool // list --oldest: oldest first (the API's order=oldest)
	reason      string
	hash        string
	since       string    // watch --since: a change-feed cursor, or 0 for the start of the log
	sinceSet    bool      // --since was given
	status      io.Writer // notes of long-running commands (watch): stderr
	// --grant, --grant-uses and --grant-when (approve).
	grant     time.Duration
	grantUses int64
	grantWhen string
	grantSet  map[string]bool // which grant flags were given
}

// command is one subcommand.
type command struct {
	synopsis string
	args     int // positional arguments
	flags    func(fs *flag.FlagSet, o *options)
	run      func(ctx context.Context, c *client, o *options, args []string, out io.Writer) error
}

var commands = map[string]command{
	"list": {
		synopsis: "list [--state S] [--limit N] [--cursor C] [--oldest]",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.state, "state", "pending", "state to list, or all")
			fs.BoolVar(&o.oldest, "oldest", false, "oldest first (default: newest first, as the web inbox)")
			fs.IntVar(&o.limit, "limit", 50, "page size, 1 to 1000")
			fs.StringVar(&o.cursor, "cursor", "", "next_cursor of the previous page")
		},
		run: runList,
	},
	"show": {synopsis: "show <id>", args: 1, run: runShow},
	"approve": {
		synopsis: "approve <id> [--reason R] [--hash sha256:...] [--grant D [--grant-uses N] [--grant-when CEL]]",
		args:     1,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.reason, "reason", "", "why you approve")
			fs.StringVar(&o.hash, "hash", "", "arguments hash you reviewed (sha256:...)")
			fs.DurationVar(&o.grant, "grant", 0, "also grant the requester this tool for this long (e.g. 1h)")
			fs.Int64Var(&o.grantUses, "grant-uses", 0, "with --grant: at most this many calls (default: no cap)")
			fs.StringVar(&o.grantWhen, "grant-when", "", "with --grant: only for arguments matching this CEL condition")
		},
		run: runApprove,
	},
	"watch": {
		synopsis: "watch [--since CURSOR]",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.since, "since", "", "start after this event's cursor (<tx>.<seq>, as --json prints), or 0 for the start of the log (default: new events only)")
		},
		run: runWatch,
	},
	"deny": {
		synopsis: "deny <id> --reason R",
		args:     1,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.reason, "reason", "", "why you deny (the agent reads it; required)")
		},
		run: runDeny,
	},
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Run runs `toolgate approvals` with args (the words after "approvals"),
// writing results to stdout and errors to stderr as "toolgate: ...". env
// looks up TOOLGATE_ADDR and TOOLGATE_TOKEN (os.Getenv in main). Flags may
// come before or after the positional arguments. It returns ExitOK,
// ExitFailure (a request failed; the server's error code and message are
// printed) or ExitUsage.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	if env == nil {
		env = func(string) string { return "" }
	}
	err := run(ctx, args, stdout, stderr, env)
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "toolgate: %s\nRun 'toolgate approvals --help' for usage.\n", cleanLines(ue.msg))
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "toolgate: %s\n", cleanLines(err.Error()))
		return ExitFailure
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	cmd, o, pos, err := parse(args, stdout, env)
	if err != nil {
		return err
	}
	o.status = stderr
	c, err := newClient(o.addr, o.token)
	if err != nil {
		return err
	}
	return cmd.run(ctx, c, o, pos, stdout)
}

// parse finds the command in args and parses its flags, filling defaults
// from env. Help goes to stdout and returns flag.ErrHelp; mistakes are
// usage errors.
func parse(args []string, stdout io.Writer, env func(string) string) (command, *options, []string, error) {
	i := firstPositional(args, commandFlagSets()...)
	if i < 0 {
		if wantsHelp(args) {
			Usage(stdout)
			return command{}, nil, nil, flag.ErrHelp
		}
		return command{}, nil, nil, usagef("missing command: want list, show, approve, deny or watch")
	}
	name := args[i]
	if name == "help" {
		Usage(stdout)
		return command{}, nil, nil, flag.ErrHelp
	}
	cmd, ok := commands[name]
	if !ok {
		return command{}, nil, nil, usagef("unknown command %q: want list, show, approve, deny or watch", name)
	}
	rest := append(append([]string{}, args[:i]...), args[i+1:]...)

	o := new(options)
	fs := cmd.flagSet(name, o)
	flags, pos := splitArgs(rest, fs)
	if err := fs.Parse(append(append(flags, "--"), pos...)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: toolgate approvals %s\n\n", cmd.synopsis)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return command{}, nil, nil, err
		}
		return command{}, nil, nil, usagef("%s: %v", name, err)
	}
	if fs.NArg() != cmd.args {
		return command{}, nil, nil, usagef("usage: toolgate approvals %s", cmd.synopsis)
	}
	if name == "deny" && strings.TrimSpace(o.reason) == "" {
		return command{}, nil, nil, usagef("deny needs --reason: the agent reads it")
	}
	fs.Visit(func(f *flag.Flag) { o.sinceSet = o.sinceSet || f.Name == "since" })
	if name == "watch" && o.sinceSet && o.since != "0" {
		if _, err := store.ParseCursor(o.since); err != nil || o.since == "" {
			return command{}, nil, nil, usagef("watch --since %q: want an event's cursor <tx>.<seq> (as watch --json prints it), or 0 for the start of the log", o.since)
		}
	}
	if name == "approve" {
		o.grantSet = map[string]bool{}
		fs.Visit(func(f *flag.Flag) { o.grantSet[f.Name] = true })
		switch {
		case (o.grantSet["grant-uses"] || o.grantSet["grant-when"]) && !o.grantSet["grant"]:
			return command{}, nil, nil, usagef("approve: --grant-uses and --grant-when need --grant D (how long the grant lasts)")
		case o.grantSet["grant"] && o.grant <= 0:
			return command{}, nil, nil, usagef("approve --grant %s: want a positive duration such as 1h", o.grant)
		case o.grantUses < 0:
			return command{}, nil, nil, usagef("approve --grant-uses %d: want 1 or more (omit it for no cap)", o.grantUses)
		case o.grantSet["hash"] && !api.IsArgumentsHash(o.hash):
			return command{}, nil, nil, usagef("approve --hash %q: want \"sha256:\" and 64 lower-case hex digits, as show prints it (Arguments hash:)", o.hash)
		}
	}
	if name == "list" {
		switch o.state {
		case "all", "pending", "approved", "denied", "expired", "cancelled", "consumed", "invalidated":
		default:
			return command{}, nil, nil, usagef("list --state %q: want pending, approved, denied, expired, cancelled, consumed, invalidated or all", o.state)
		}
		if o.limit < 1 || o.limit > 1000 {
			return command{}, nil, nil, usagef("list --limit %d: want 1 to 1000", o.limit)
		}
	}
	o.addr = cmp.Or(o.addr, env(EnvAddr), DefaultAddr)
	o.token = cmp.Or(o.token, env(EnvToken))
	if o.token == "" {
		return command{}, nil, nil, usagef("no token: pass --token or set %s to an approver's token (approvers[] in the config, or the approver token serve --dev printed)", EnvToken)
	}
	return cmd, o, fs.Args(), nil
}

// flagSet returns the flags of c, bound to o; it prints nothing itself.
func (c command) flagSet(name string, o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("approvals "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.addr, "addr", "", "admin API address (default $"+EnvAddr+", else "+DefaultAddr+")")
	fs.StringVar(&o.token, "token", "", "bearer token (default $"+EnvToken+")")
	fs.BoolVar(&o.json, "json", false, "print the server's JSON")
	if c.flags != nil {
		c.flags(fs, o)
	}
	return fs
}

// commandFlagSets returns the flag sets of every command, to find the
// command word among flags that may take values.
func commandFlagSets() []*flag.FlagSet {
	var sets []*flag.FlagSet
	for name, c := range commands {
		sets = append(sets, c.flagSet(name, new(options)))
	}
	return sets
}

// wantsHelp reports whether args ask for help.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// splitArgs separates args into flags (with their values) and positional
// arguments, so that flags may follow positionals: Go's flag package stops
// at the first positional. A flag that takes a value consumes the next word
// unless written --name=value; everything after "--" is positional. Unknown
// flags are kept as flags, for fs.Parse to report.
func splitArgs(args []string, fs *flag.FlagSet) (flags, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return flags, append(pos, args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		if takesValue(a, fs) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, pos
}

// firstPositional returns the index of the first positional argument of
// args, skipping flags and their values (a flag takes a value if it does in
// any of sets), or -1.
func firstPositional(args []string, sets ...*flag.FlagSet) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return i + 1
			}
			return -1
		}
		if len(a) < 2 || a[0] != '-' {
			return i
		}
		if takesValue(a, sets...) {
			i++
		}
	}
	return -1
}

// takesValue reports whether the flag word a (like "--reason" or "-limit=5")
// names a flag of one of sets that needs a separate value word.
func takesValue(a string, sets ...*flag.FlagSet) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	if strings.Contains(name, "=") {
		return false
	}
	for _, fs := range sets {
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			return false
		}
		return true
	}
	return false
}
