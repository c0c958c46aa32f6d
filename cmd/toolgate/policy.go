package main

import (
	"context"
	"io"
	"os"

	"toolgate/internal/cli"
)

// policyCmd runs "toolgate policy check [flags] FILE" (checkCmd), which
// fails exactly when serve would refuse the config; hands "explain" and
// "test" (against a config file or the live gateway) to cli.RunExplain and
// cli.RunPolicyTest; and the admin API commands (propose, show, diff,
// apply; policy.source: store) to cli.RunPolicy.
func policyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "explain":
			return cli.RunExplain(ctx, args[1:], stdout, stderr, os.LookupEnv)
		case "test":
			return cli.RunPolicyTest(ctx, args[1:], stdout, stderr, os.LookupEnv)
		}
	}
	if len(args) == 0 || args[0] != "check" {
		return cli.RunPolicy(ctx, args, stdout, stderr, os.Getenv)
	}
	return checkCmd(args[1:], stdout, stderr, osSystem())
}
