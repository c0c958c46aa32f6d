package policyfile

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/config"
	"toolgate/internal/policy"
	"toolgate/internal/telemetry"
)

const head = `
listen: { mcp: "127.0.0.1:0", admin: "" }
storage: { driver: sqlite, path: /tmp/t.db }
servers:
  t: { command: x }
`

const allowEcho = head + `
policy:
  default: deny
  rules:
    - { name: echo, server: t, tools: [echo], effect: allow }
`

const denyEcho = head + `
policy:
  default: deny
  rules:
    - { name: no echo, server: t, tools: [echo], effect: deny }
`

var echo = policy.Call{Server: "t", Tool: "echo"}

type fixture struct {
	path   string
	holder *policy.Holder
	r      *Reloader
	reg    *prometheus.Registry
	log    *syncBuf
}

func setup(t *testing.T, text string, opts *Options) *fixture {
	t.Helper()
	f := &fixture{path: filepath.Join(t.TempDir(), "toolgate.yaml"), reg: prometheus.NewRegistry(), log: &syncBuf{}}
	f.write(t, text)
	cfg, err := config.LoadFile(f.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy
	f.holder = policy.NewHolder(&p)
	if opts == nil {
		opts = &Options{}
	}
	opts.Logger = slog.New(slog.NewTextHandler(f.log, nil))
	opts.Metrics = telemetry.NewMetrics(f.reg)
	f.r = New(f.path, cfg, f.holder, opts)
	return f
}

func (f *fixture) write(t *testing.T, text string) {
	t.Helper()
	if err := os.WriteFile(f.path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) effect(t *testing.T) policy.Effect {
	t.Helper()
	d, err := f.holder.Evaluate(echo)
	if err != nil {
		t.Fatal(err)
	}
	return d.Effect
}

func (f *fixture) counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestReload(t *testing.T) {
	f := setup(t, allowEcho, nil)
	if got := f.effect(t); got != policy.Allow {
		t.Fatalf("before reload: %s, want allow", got)
	}
	before := policy.Revision(f.holder.Load())

	f.write(t, denyEcho)
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatalf("Reload = %v", err)
	}
	if got := f.effect(t); got != policy.Deny {
		t.Errorf("after reload: %s, want deny", got)
	}
	after := policy.Revision(f.holder.Load())
	if after == before {
		t.Errorf("revision unchanged by a reload that changed the policy")
	}
	log := f.log.String()
	for _, want := range []string{"policy reloaded", "old_revision=" + before, "revision=" + after, `rule \"no echo\" added`, `rule \"echo\" removed`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if got := f.counter(t, "toolgate_policy_reloads_total"); got != 1 {
		t.Errorf("reloads = %v, want 1", got)
	}

	// An invalid file keeps the policy in force.
	f.write(t, denyEcho+"    - { name: bad, effect: permit }\n")
	err := f.r.Reload(t.Context())
	if err == nil || !strings.Contains(err.Error(), `effect "permit"`) {
		t.Fatalf("Reload(invalid) = %v, want the validation error", err)
	}
	if got := policy.Revision(f.holder.Load()); got != after {
		t.Errorf("an invalid file changed the policy to %s", got)
	}
	if got := f.effect(t); got != policy.Deny {
		t.Errorf("after invalid reload: %s, want deny", got)
	}
	if !strings.Contains(f.log.String(), "policy reload failed") {
		t.Errorf("failure not logged:\n%s", f.log)
	}
	if got := f.counter(t, "toolgate_policy_reload_failures_total"); got != 1 {
		t.Errorf("failures = %v, want 1", got)
	}

	// A file that does not parse, and a missing file, too.
	f.write(t, "policy: [\n")
	if err := f.r.Reload(t.Context()); err == nil {
		t.Error("Reload(syntax error) = nil")
	}
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := f.r.Reload(t.Context()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Reload(missing) = %v, want ErrNotExist", err)
	}
	if got := f.counter(t, "toolgate_policy_reload_failures_total"); got != 3 {
		t.Errorf("failures = %v, want 3", got)
	}
	if got := f.effect(t); got != policy.Deny {
		t.Errorf("after failed reloads: %s, want deny", got)
	}
}

func TestReloadRefusals(t *testing.T) {
	cases := []struct {
		name string
		text string
		want string
	}{
		{"source changed", strings.Replace(denyEcho, "policy:\n", "policy:\n  source: store\n", 1), "policy.source changed from file to store"},
		{"check fails", denyEcho, "nobody can review"},
		{"unset variable", strings.Replace(denyEcho, "tools: [echo]", `tools: ["${NOPE}"]`, 1), "${NOPE} is not set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := setup(t, allowEcho, &Options{Check: func(cfg config.Config) error {
				if c.name == "check fails" {
					return errors.New("nobody can review")
				}
				return nil
			}})
			f.write(t, c.text)
			err := f.r.Reload(t.Context())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Reload = %v, want %q", err, c.want)
			}
			if got := f.effect(t); got != policy.Allow {
				t.Errorf("policy changed to %s", got)
			}
		})
	}
}

func TestReloadUnchangedAndRestartWarning(t *testing.T) {
	f := setup(t, allowEcho, nil)
	rev := policy.Revision(f.holder.Load())
	f.write(t, allowEcho+"# a comment\n")
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := policy.Revision(f.holder.Load()); got != rev {
		t.Errorf("revision %s, want %s", got, rev)
	}
	if !strings.Contains(f.log.String(), "changes=none") {
		t.Errorf("log lacks changes=none:\n%s", f.log)
	}
	if strings.Contains(f.log.String(), "restart") {
		t.Errorf("restart warning without a change outside policy:\n%s", f.log)
	}
	f.write(t, strings.Replace(allowEcho, "command: x", "command: y", 1))
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The warning names what changed, so the one who edited the file
	// knows which edit waits for a restart.
	if !strings.Contains(f.log.String(), "take effect only after a restart") || !strings.Contains(f.log.String(), "keys=servers") {
		t.Errorf("no restart warning naming servers:\n%s", f.log)
	}
}

func TestChanged(t *testing.T) {
	f := setup(t, allowEcho, nil)
	if ch, err := f.r.Changed(); err != nil || ch {
		t.Fatalf("Changed = %v, %v before any edit", ch, err)
	}
	f.write(t, denyEcho)
	if ch, err := f.r.Changed(); err != nil || !ch {
		t.Fatalf("Changed = %v, %v after an edit", ch, err)
	}
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ch, _ := f.r.Changed(); ch {
		t.Errorf("Changed after Reload read the edit")
	}
	// An invalid edit is seen once, not retried until the file changes.
	f.write(t, "policy: [\n")
	if ch, _ := f.r.Changed(); !ch {
		t.Fatal("invalid edit not seen")
	}
	_ = f.r.Reload(t.Context())
	if ch, _ := f.r.Changed(); ch {
		t.Errorf("Changed after a failed Reload of the same content")
	}
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Changed(); err == nil {
		t.Errorf("Changed on a missing file: no error")
	}
}

// TestRunReloadsOnSignal drives Run through its hup channel.
func TestRunReloadsOnSignal(t *testing.T) {
	f := setup(t, allowEcho, nil)
	hup := make(chan os.Signal)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.r.Run(ctx, hup, 0) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	f.write(t, denyEcho)
	hup <- os.Interrupt // any value triggers a reload
	hup <- os.Interrupt // the first reload has finished once Run takes this one
	if got := f.effect(t); got != policy.Deny {
		t.Errorf("after signal: %s, want deny", got)
	}
}

// syncBuf is a strings.Builder safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
