package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

const auditExportUsage = `Usage: toolgate audit export [--since T] [--after N] [--limit N] [--format jsonl] [--addr A] [--token T]

Streams the audit chain from the admin API (GET /v1/audit; roles viewer or
admin; a tenant's token gets its tenant's links) as JSON Lines, one link per
line: {"seq", "prev_hash", "hash", "record"}. The record is the link's
canonical JSON byte for byte (so hash = sha256(prev_hash + record) can be
checked by the receiver) and is written as the server sent it.

  --since T   an RFC 3339 time or a duration back from now (24h)
  --after N   resume after sequence number N
  --limit N   at most N lines
  --format F  jsonl (the only format)
`

// RunAuditExport runs "toolgate audit export" with args (the words after
// "export"): see auditExportUsage. env looks up TOOLGATE_ADDR and
// TOOLGATE_TOKEN. It returns ExitOK, ExitFailure or ExitUsage.
func RunAuditExport(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	err := runAuditExport(ctx, args, stdout, env)
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "toolgate: %s\nRun 'toolgate audit export --help' for usage.\n", cleanLines(ue.msg))
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "toolgate: %s\n", cleanLines(err.Error()))
		return ExitFailure
	}
}

func runAuditExport(ctx context.Context, args []string, stdout io.Writer, env func(string) string) error {
	var (
		addr, token, since, format string
		after, limit               int64
	)
	fs := flag.NewFlagSet("audit export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&addr, "addr", "", "admin API address (default $"+EnvAddr+", else "+DefaultAddr+")")
	fs.StringVar(&token, "token", "", "bearer token (default $"+EnvToken+")")
	fs.StringVar(&since, "since", "", "RFC 3339 time or duration back from now")
	fs.Int64Var(&after, "after", 0, "resume after this sequence number")
	fs.Int64Var(&limit, "limit", 0, "at most this many lines (0: all)")
	fs.StringVar(&format, "format", "jsonl", "output format: jsonl")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = io.WriteString(stdout, auditExportUsage)
			return err
		}
		return usagef("audit export: %v", err)
	}
	switch {
	case fs.NArg() > 0:
		return usagef("audit export takes no arguments, got %q", fs.Arg(0))
	case format != "jsonl":
		return usagef("--format %q: want jsonl", format)
	case after < 0 || limit < 0:
		return usagef("--after and --limit must not be negative")
	}
	addr = cmp.Or(addr, env(EnvAddr), DefaultAddr)
	token = cmp.Or(token, env(EnvToken))
	if token == "" {
		return usagef("no token: pass --token or set %s to an approver's token (approvers[] in the config, or the approver token serve --dev printed)", EnvToken)
	}
	c, err := newClient(addr, token)
	if err != nil {
		return err
	}
	q := url.Values{}
	if since != "" {
		q.Set("since", since)
	}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.FormatInt(limit, 10))
	}
	path := "/v1/audit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	// A long export is not cut off by the per-request timeout of the
	// other commands: ctx (the process) bounds it.
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return c.requestError(http.MethodGet, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
		return decodeError(resp.StatusCode, b)
	}
	if _, err := io.Copy(stdout, resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
