package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// conn holds the flags every REST command of a group takes.
type conn struct {
	addr, token string
	json        bool
}

// subcommand is one command of a group; O is the group's options, which
// embed conn.
type subcommand[O any] struct {
	synopsis string
	args     int // positional arguments
	flags    func(fs *flag.FlagSet, o *O)
	run      func(ctx context.Context, c *client, o *O, args []string, out io.Writer) error
}

// group is a family of REST subcommands sharing the connection flags:
// `toolgate policy propose|show|diff|apply` and `toolgate grants
// list|show|revoke`.
type group[O any] struct {
	name     string // the word after "toolgate"
	want     string // the commands, in words, for "missing command" errors
	usage    func(io.Writer)
	commands map[string]subcommand[O]
	conn     func(*O) *conn
	// check, when set, reports a usage error in the parsed options.
	check func(name string, o *O) error
}

// Run runs the group with args (the words after its name), writing results
// to stdout and errors to stderr as "toolgate: ..."; it returns ExitOK,
// ExitFailure or ExitUsage.
func (g group[O]) Run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	if env == nil {
		env = func(string) string { return "" }
	}
	err := g.run(ctx, args, stdout, env)
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		_, _ = fmt.Fprintf(stderr, "toolgate: %s\nRun 'toolgate %s --help' for usage.\n", cleanLines(ue.msg), g.name)
		return ExitUsage
	default:
		_, _ = fmt.Fprintf(stderr, "toolgate: %s\n", cleanLines(err.Error()))
		return ExitFailure
	}
}

// flagSet returns the flags of command name, bound to o.
func (g group[O]) flagSet(name string, o *O) *flag.FlagSet {
	fs := flag.NewFlagSet(g.name+" "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := g.conn(o)
	fs.StringVar(&c.addr, "addr", "", "admin API address (default $"+EnvAddr+", else "+DefaultAddr+")")
	fs.StringVar(&c.token, "token", "", "bearer token (default $"+EnvToken+")")
	fs.BoolVar(&c.json, "json", false, "print the server's JSON")
	if f := g.commands[name].flags; f != nil {
		f(fs, o)
	}
	return fs
}

func (g group[O]) run(ctx context.Context, args []string, stdout io.Writer, env func(string) string) error {
	var sets []*flag.FlagSet
	for name := range g.commands {
		sets = append(sets, g.flagSet(name, new(O)))
	}
	i := firstPositional(args, sets...)
	if i < 0 || args[i] == "help" {
		if i >= 0 || wantsHelp(args) {
			g.usage(stdout)
			return flag.ErrHelp
		}
		return usagef("missing command: want %s", g.want)
	}
	name := args[i]
	cmd, ok := g.commands[name]
	if !ok {
		return usagef("unknown command %q: want %s", name, g.want)
	}
	rest := append(append([]string{}, args[:i]...), args[i+1:]...)
	o := new(O)
	fs := g.flagSet(name, o)
	flags, pos := splitArgs(rest, fs)
	if err := fs.Parse(append(append(flags, "--"), pos...)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = fmt.Fprintf(stdout, "Usage: toolgate %s %s\n\n", g.name, cmd.synopsis)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		}
		return usagef("%s: %v", name, err)
	}
	if fs.NArg() != cmd.args {
		return usagef("usage: toolgate %s %s", g.name, cmd.synopsis)
	}
	if g.check != nil {
		if err := g.check(name, o); err != nil {
			return err
		}
	}
	c := g.conn(o)
	c.addr = cmp.Or(c.addr, env(EnvAddr), DefaultAddr)
	c.token = cmp.Or(c.token, env(EnvToken))
	if c.token == "" {
		return usagef("no token: pass --token or set %s to an approver's token (approvers[] in the config, or the approver token serve --dev printed)", EnvToken)
	}
	cl, err := newClient(c.addr, c.token)
	if err != nil {
		return err
	}
	return cmd.run(ctx, cl, o, fs.Args(), stdout)
}

// resolveShortID turns a full id, or a unique prefix or suffix of at least
// minPrefix characters, into a full id, listing matches through path (a
// list route taking state=all, id_prefix, id_suffix and limit) with list,
// which returns the ids and a one-line description of each match. what
// names the kind of id in messages ("grant"). A too short or malformed id
// is a usage error; no match or several matches are failures, the latter
// listing the matches. Suffixes matter because UUIDv7 ids made close
// together share their first characters while their ends are random.
func resolveShortID(ctx context.Context, c *client, what, path, arg string, list func(ctx context.Context, u string) (ids, lines []string, more bool, err error)) (string, error) {
	id := strings.ToLower(arg)
	if strings.Trim(id, "0123456789abcdef-") != "" || len(id) > 36 {
		return "", usagef("invalid %s id %q: ids are UUIDs (hex digits and dashes, 36 characters); give a whole id, or at least %d of its first or last characters", what, arg, minPrefix)
	}
	if isUUID(id) {
		return id, nil
	}
	if len(id) < minPrefix {
		return "", usagef("%s id %q is too short: give at least %d of its first or last characters", what, arg, minPrefix)
	}
	var ids, lines []string
	more := false
	seen := map[string]bool{}
	for _, param := range []string{"id_prefix", "id_suffix"} {
		q := url.Values{"state": {"all"}, param: {id}, "limit": {strconv.Itoa(maxMatches)}}
		pids, plines, pmore, err := list(ctx, path+"?"+q.Encode())
		if err != nil {
			return "", err
		}
		more = more || pmore
		for i, m := range pids {
			if !seen[m] {
				seen[m] = true
				ids = append(ids, m)
				lines = append(lines, plines[i])
			}
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no %s id starts or ends with %q", what, id)
	case 1:
		return ids[0], nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s id %q is ambiguous; it matches:", what, id)
	for _, l := range lines {
		fmt.Fprintf(&b, "\n  %s", l)
	}
	if more {
		b.WriteString("\n  ...and more")
	}
	return "", errors.New(b.String())
}
