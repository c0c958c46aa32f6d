package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"toolgate/internal/cli"
	"toolgate/internal/config"
)

// policyCmd runs "toolgate policy check FILE", which prints every problem
// in the config at once and exits 2 when there is any; hands "explain" and
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
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: toolgate policy check FILE")
		return 2
	}
	problems, warnings := config.Check(args[1], os.LookupEnv)
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", args[1], len(problems))
		return 2
	}
	fmt.Fprintf(stdout, "%s: ok\n", args[1])
	return 0
}
