// Command toolgate is a human-in-the-loop approval gateway for MCP tool calls.
//
//	toolgate serve --config FILE [--dev] [--stdio] [--ready-file F]
//	toolgate policy check [--dev] [--stdio] [--insecure-no-auth] [--tools SERVER=FILE]... FILE
//	toolgate policy explain|test ...
//	toolgate approvals list|show|approve|deny ...
//	toolgate grants list|show|revoke ...
//	toolgate audit verify|export ...
//
// Exit codes: 0 ok, 1 failure, 2 usage or invalid config.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"toolgate/internal/cli"
)

// errUsage and errConfig mark errors that exit with status 2: wrong
// flags or arguments, and a config (or its surroundings: token files, the
// admin socket's directory) that serve refuses to start with.
var (
	errUsage  = errors.New("usage")
	errConfig = errors.New("invalid config")
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stdin, stdout, stderr)
	case "policy":
		return policyCmd(ctx, args[1:], stdout, stderr)
	case "approvals":
		return cli.Run(ctx, args[1:], stdout, stderr, os.Getenv)
	case "grants":
		return cli.RunGrants(ctx, args[1:], stdout, stderr, os.Getenv)
	case "audit":
		return auditCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		return versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "toolgate: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "toolgate:", err)
		if errors.Is(err, errUsage) || errors.Is(err, errConfig) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `toolgate — a human-in-the-loop approval gateway for MCP tool calls

Usage:
  toolgate serve --config FILE [flags]     run the gateway (see "toolgate serve -h")
  toolgate policy check [flags] FILE       check a config as serve with those flags would (--dev, --stdio,
                                           --insecure-no-auth); prints every problem, exits 2 if any
  toolgate policy explain ...              how the policy decides one call, rule by rule
  toolgate policy test CASES.yaml          check a table of calls against the policy; exits 1 on a mismatch
  toolgate policy propose|show|diff|apply  store-backed policy revisions (see "toolgate policy help")
  toolgate approvals list|show|approve|deny   decide held calls through the admin API
  toolgate approvals watch                 print requests and decisions as they happen
  toolgate grants list|show|revoke         remembered grants (approvals approve --grant D makes one)
  toolgate audit verify --config FILE      check the audit chain in the store; exits 1 naming the first broken link
  toolgate audit export [--since T]        stream the audit chain (JSON Lines) from the admin API
  toolgate version

Exit codes: 0 ok, 1 failure, 2 usage or invalid config.
`)
}
