package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"toolgate/internal/audit"
	"toolgate/internal/cli"
	"toolgate/internal/config"
	"toolgate/internal/store/sqlstore"
)

const auditUsage = `Usage:
  toolgate audit verify --config FILE [--json]
        Walk the audit chain in the store the config names (read directly,
        not through a gateway) and check every link. Prints the head's
        sequence number and hash (keep it elsewhere: docs/audit.md). Exit 0
        when the chain verifies, 1 naming the first broken sequence number.
  toolgate audit export [--since T] [--format jsonl] ...
        Stream the chain from the admin API (see "toolgate audit export -h").
`

// auditCmd runs "toolgate audit verify|export".
func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "toolgate: missing command: want verify or export\n"+auditUsage)
		return 2
	}
	switch args[0] {
	case "export":
		return cli.RunAuditExport(ctx, args[1:], stdout, stderr, os.Getenv)
	case "verify":
		return auditVerify(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, auditUsage)
		return 0
	}
	fmt.Fprintf(stderr, "toolgate: unknown audit command %q\n%s", args[0], auditUsage)
	return 2
}

// auditVerify opens the store of --config and verifies the chain. It reads
// the database itself so that a verdict never rests on a gateway that
// might be compromised, and works while no gateway runs.
func auditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path to the YAML config whose storage holds the chain (required)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	usage := func(w io.Writer) {
		fmt.Fprint(w, "Usage: toolgate audit verify --config FILE [--json]\n\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
		fmt.Fprint(w, "\nReads the store the config names directly (no gateway needed) and checks every link.\n"+
			"Exit status: 0 the chain verifies, 1 a broken link (named) or no store, 2 usage or invalid config.\n")
	}
	fs.Usage = func() {} // printed below: to stdout when asked for, else to stderr
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0
		}
		usage(stderr)
		return 2
	}
	if strings.TrimSpace(*path) == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "toolgate: audit verify needs --config FILE and no positional arguments")
		usage(stderr)
		return 2
	}
	cfg, err := config.LoadFile(*path, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate: %v: %v\n", errConfig, err) // err names the file
		return 2
	}
	if cfg.Storage.Driver == sqlstore.DriverPostgres {
		if err := sqlstore.CheckDSN(cfg.Storage.DSN); err != nil {
			fmt.Fprintf(stderr, "toolgate: %s: storage.dsn: %v\n", *path, err)
			return 2
		}
	}
	if cfg.Storage.Driver == "sqlite" {
		// Opening a SQLite path that does not exist would create an empty
		// store and report its empty chain as verified: with a relative
		// storage.path, that is what running from another directory does.
		if _, err := os.Stat(cfg.Storage.Path); errors.Is(err, iofs.ErrNotExist) {
			abs, aerr := filepath.Abs(cfg.Storage.Path)
			if aerr != nil {
				abs = cfg.Storage.Path
			}
			fmt.Fprintf(stderr, "toolgate: audit verify: no store at %s (storage.path %q; a relative path is taken from the working directory, as serve takes it): nothing verified\n", abs, cfg.Storage.Path)
			return 1
		}
	}
	db, err := sqlstore.Open(ctx, sqlstore.Config{Driver: cfg.Storage.Driver, Path: cfg.Storage.Path, DSN: cfg.Storage.DSN,
		MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintf(stderr, "toolgate: open store: %v\n", err)
		return 1
	}
	defer func() { _ = db.Close() }()
	res, err := audit.Verify(ctx, db)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate: audit verify: %v\n", err)
		return 1
	}
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		from := res.Anchor + 1
		if res.Anchor > 0 {
			fmt.Fprintf(stdout, "anchor: links up to %d were pruned; the last one's hash is %s\n", res.Anchor, res.AnchorHash)
		}
		fmt.Fprintf(stdout, "head: %d %s\n", res.Head, res.HeadHash)
		if res.OK {
			fmt.Fprintf(stdout, "ok: %d links (%d to %d) verify\n", res.Links, from, res.Head)
		}
	}
	if !res.OK {
		fmt.Fprintf(stderr, "toolgate: audit chain broken at sequence %d: %s\n", res.BrokenSeq, res.Problem)
		return 1
	}
	return 0
}
