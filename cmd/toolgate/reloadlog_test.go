package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"toolgate/internal/config"
	"toolgate/internal/policy"
)

// TestPolicyInForceLogNamesTheDigest (newuser48): with policy.source store
// the start logged "policy in force source=store revision=sha256:…" next
// to the follower's "revision=1 digest=sha256:…"; it names the digest as
// a digest now. A file policy's revision is its digest, as before.
func TestPolicyInForceLogNamesTheDigest(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{policy.SourceStore, "source=store digest=sha256:"},
		{policy.SourceFile, "source=file revision=sha256:"},
	} {
		cfg := config.Default()
		cfg.Policy.Source = tc.source
		var buf bytes.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // the store's loop returns at once; the file's after its first log
		_ = reloadPolicy(ctx, "", cfg, policy.NewHolder(&cfg.Policy), nil, false, false, slog.New(slog.NewTextHandler(&buf, nil)), nil, nil, nil, nil)
		if !strings.Contains(buf.String(), `msg="policy in force" `+tc.want) {
			t.Errorf("source %s logged:\n%s\nwant %q", tc.source, buf.String(), tc.want)
		}
	}
}
