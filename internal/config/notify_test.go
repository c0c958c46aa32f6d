package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/privfile"
)

// notifyBase is a config with one webhook and one Slack channel; each case
// of TestNotifyValidate edits it.
const notifyBase = `
listen: { mcp: "127.0.0.1:0", admin: "127.0.0.1:0" }
storage: { driver: sqlite, path: /tmp/t.db }
servers:
  fs: { command: npx }
approvers:
  - { id: alice, token_env: ALICE, roles: [approver], slack_user_id: U0ALICE }
  - { id: bob, token_env: BOB, roles: [approver] }
approvals: { public_url: "https://toolgate.example/inbox" }
policy:
  rules:
    - { name: writes, server: fs, effect: approve, chat_approval: true }
notify:
  channels:
    - { name: ops-hook, type: webhook, url_env: HOOK_URL, secret_env: HOOK_SECRET, events: [requested, decided], servers: [fs], rules: [writes], max_age: 30m }
    - { name: slack, type: slack, token_env: SLACK_TOKEN, channel: C0OPS, secret_file: /run/slack.secret, api_url: "http://127.0.0.1:9/api" }
`

func TestNotifyDefaultsAndValid(t *testing.T) {
	cfg := mustLoad(t, notifyBase, nil)
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %q, want none", w)
	}
	n := cfg.Notify
	if n.Poll != time.Second || n.Timeout != 10*time.Second || n.Backoff != time.Second || n.BackoffMax != 5*time.Minute || n.Lease != 5*time.Second {
		t.Errorf("notify defaults = %+v", n)
	}
	hook, slack := n.Channels[0], n.Channels[1]
	if hook.EffectiveMaxAge() != 30*time.Minute || slack.EffectiveMaxAge() != time.Hour {
		t.Errorf("max_age = %v and %v, want 30m and the default 1h", hook.EffectiveMaxAge(), slack.EffectiveMaxAge())
	}
	if diff := cmp.Diff([]string{"requested", "reviewed", "decided", "expired", "cancelled", "invalidated", "dispatch_failed"}, slack.EffectiveEvents()); diff != "" {
		t.Errorf("default events (-want +got):\n%s", diff)
	}
	if got := slack.EffectiveAPIURL(); got != "http://127.0.0.1:9/api" {
		t.Errorf("api_url = %q", got)
	}
	if got := (NotifyChannel{}).EffectiveAPIURL(); got != DefaultSlackAPI {
		t.Errorf("default api_url = %q", got)
	}
	if cfg.Approvers[0].SlackUserID != "U0ALICE" || cfg.Approvals.PublicURL != "https://toolgate.example/inbox" {
		t.Errorf("slack_user_id %q, public_url %q", cfg.Approvers[0].SlackUserID, cfg.Approvals.PublicURL)
	}
}

func TestNotifyValidate(t *testing.T) {
	edit := func(t *testing.T, old, new string) string {
		t.Helper()
		if strings.Count(notifyBase, old) != 1 {
			t.Fatalf("%q does not occur exactly once", old)
		}
		return strings.Replace(notifyBase, old, new, 1)
	}
	hook := `{ name: ops-hook, type: webhook, url_env: HOOK_URL, secret_env: HOOK_SECRET, events: [requested, decided], servers: [fs], rules: [writes], max_age: 30m }`
	cases := []struct {
		name     string
		old, new string
		want     []string
	}{
		{"unknown key", `max_age: 30m }`, `max_age: 30m, url: "https://x" }`, []string{`line 15: unknown key "url" in notify.channels[0]`}},
		{"inline url is not a key", hook, `{ name: ops-hook, type: webhook, secret_env: S, webhook_url: "https://hooks/x" }`, []string{`unknown key "webhook_url" in notify.channels[0]`}},
		{"no name, no type", hook, `{ url_env: U, secret_env: S }`, []string{`notify.channels[0].name: required`, `notify.channels[0].type: required`}},
		{"bad name", `name: ops-hook`, `name: "ops hook"`, []string{`notify.channels[0] "ops hook".name: must match`}},
		{"duplicate name", `name: slack,`, `name: ops-hook,`, []string{`notify.channels[1] "ops-hook": name also used by notify.channels[0]`}},
		{"bad type", `type: webhook`, `type: email`, []string{`.type "email": want webhook or slack`}},
		{"webhook without url or secret", hook, `{ name: h, type: webhook }`, []string{`"h": a webhook needs url_env or url_file`, `"h": a webhook needs secret_env or secret_file`}},
		{"webhook with slack keys", `servers: [fs], rules`, `channel: C1, token_env: T, servers: [fs], rules`, []string{`"ops-hook": token_env, token_file, channel and api_url are only for slack`}},
		{"env and file both", `url_env: HOOK_URL,`, `url_env: HOOK_URL, url_file: /run/u,`, []string{`"ops-hook": set only one of url_env or url_file`}},
		{"bad variable name", `url_env: HOOK_URL`, `url_env: "HOOK-URL"`, []string{`"ops-hook".url_env "HOOK-URL": not a variable name`}},
		{"unknown event", `events: [requested, decided]`, `events: [requested, approved_by_bob]`, []string{`"ops-hook".events[1] "approved_by_bob": want one of requested, reviewed`}},
		{"unknown server", `servers: [fs]`, `servers: [fs, pay]`, []string{`"ops-hook".servers[1]: server "pay" is not configured (servers: fs)`}},
		{"empty rule", `rules: [writes]`, `rules: [writes, ""]`, []string{`"ops-hook".rules[1]: empty`}},
		{"negative max_age", `max_age: 30m`, `max_age: -1s`, []string{`"ops-hook".max_age -1s: must be > 0`}},
		{"slack token and url", `token_env: SLACK_TOKEN, channel: C0OPS`, `token_env: SLACK_TOKEN, url_env: U, channel: C0OPS`, []string{`"slack": set a bot token (token_env or token_file) or an incoming-webhook URL`}},
		{"slack token without channel", `token_env: SLACK_TOKEN, channel: C0OPS`, `token_env: SLACK_TOKEN`, []string{`"slack".channel: required with a bot token`}},
		{"slack with neither", `token_env: SLACK_TOKEN, channel: C0OPS`, `channel: C0OPS`, []string{`"slack": a slack channel needs a bot token`}},
		{"slack incoming webhook with channel", `token_env: SLACK_TOKEN, channel: C0OPS`, `url_env: SLACK_HOOK, channel: C0OPS`, []string{`"slack".channel: only with a bot token`}},
		{"slack incoming webhook", `token_env: SLACK_TOKEN, channel: C0OPS`, `url_file: /run/slack.url`, nil},
		{"slack bad api_url", `api_url: "http://127.0.0.1:9/api"`, `api_url: "ftp://slack"`, []string{`"slack".api_url "ftp://slack": scheme "ftp"`}},
		{"notify timings", `notify:
  channels:`, `notify:
  poll: 0s
  timeout: -1s
  backoff: 2m
  backoff_max: 1m
  lease: 500ms
  channels:`, []string{"notify.poll 0s", "notify.timeout -1s", "notify.backoff_max 1m0s: must be >= notify.backoff (2m0s)", "notify.lease 500ms: must be at least 1s"}},
		{"slack user id shape", `slack_user_id: U0ALICE`, `slack_user_id: alice`, []string{`approvers[0].slack_user_id "alice": want a Slack user id`}},
		{"slack user id too short", `slack_user_id: U0ALICE`, `slack_user_id: U1`, []string{`approvers[0].slack_user_id "U1": want a Slack user id: U or W, then at least two upper-case letters or digits`}},
		{"slack user id twice", `roles: [approver] }`, `roles: [approver], slack_user_id: U0ALICE }`, []string{`approvers[1].slack_user_id "U0ALICE": also used by approvers[0]`}},
		{"public url", `public_url: "https://toolgate.example/inbox"`, `public_url: "toolgate.example"`, []string{`approvals.public_url "toolgate.example": scheme ""`}},
		{"public url query", `public_url: "https://toolgate.example/inbox"`, `public_url: "https://toolgate.example/?a=1"`, []string{`must not have a query or fragment`}},
		{"chat_approval on a deny rule", `effect: approve, chat_approval: true`, `effect: deny, chat_approval: true`, []string{`policy.rules[0] "writes": chat_approval is set but effect is "deny"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, edit(t, c.old, c.new), nil)
			checkLines(t, err, c.want)
		})
	}
}

func TestNotifyWarnings(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     string
	}{
		{"unknown rule name", `rules: [writes]`, `rules: [writes, wrtes]`, `notify.channels[0] "ops-hook".rules[1]: "wrtes" names no rule`},
		{"chat approval without a signing secret", `, secret_file: /run/slack.secret`, ``, `no slack channel has a signing secret`},
		{"chat approval without mapped approvers", `, slack_user_id: U0ALICE`, ``, `no approver has a slack_user_id`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustLoad(t, strings.Replace(notifyBase, c.old, c.new, 1), nil)
			w := cfg.Warnings()
			if len(w) != 1 || !strings.Contains(w[0], c.want) {
				t.Errorf("Warnings = %q, want one containing %q", w, c.want)
			}
		})
	}
	for _, rule := range []string{"default", "session require_approval"} {
		cfg := mustLoad(t, strings.Replace(notifyBase, `rules: [writes]`, `rules: [`+rule+`]`, 1), nil)
		if w := cfg.Warnings(); len(w) != 0 {
			t.Errorf("rules: [%s]: Warnings = %q, want none", rule, w)
		}
	}
}

func TestNotifySecrets(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "slack.secret")
	if err := os.WriteFile(secretFile, []byte("  s1gning\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(notifyBase, "/run/slack.secret", secretFile, 1)
	cfg := mustLoad(t, text, nil)
	env := MapEnv(map[string]string{"HOOK_URL": "https://hooks.example/abc?k=tok3n", "HOOK_SECRET": "whsec", "SLACK_TOKEN": "xoxb-1"})
	got, err := cfg.NotifySecrets(env, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	want := []ChannelSecrets{
		{URL: "https://hooks.example/abc?k=tok3n", Secret: "whsec"},
		{Secret: "s1gning", Token: "xoxb-1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NotifySecrets (-want +got):\n%s", diff)
	}

	// Every problem at once, none echoing a value.
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Notify.Channels[1].SecretFile = empty
	cfg.Notify.Channels = append(cfg.Notify.Channels, NotifyChannel{Name: "gone", Type: ChannelWebhook, URLFile: filepath.Join(dir, "absent"), SecretEnv: "HOOK_SECRET"})
	bad := MapEnv(map[string]string{"HOOK_URL": "hooks.example/abc?k=tok3n", "HOOK_SECRET": "whsec", "SLACK_TOKEN": ""})
	_, err = cfg.NotifySecrets(bad, os.ReadFile)
	lines := Lines(err)
	wantLines := []string{
		`notify.channels[0] "ops-hook": url_env HOOK_URL: scheme "", want http or https`,
		`notify.channels[1] "slack": secret_file ` + empty + ` is empty`,
		`notify.channels[1] "slack": token_env SLACK_TOKEN is empty`,
		`notify.channels[2] "gone": url_file ` + filepath.Join(dir, "absent") + `: open ` + filepath.Join(dir, "absent") + `: no such file or directory` + missingFileFix,
	}
	if diff := cmp.Diff(wantLines, lines); diff != "" {
		t.Errorf("NotifySecrets errors (-want +got):\n%s", diff)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file does not wrap fs.ErrNotExist")
	}
	if strings.Contains(err.Error(), "tok3n") || strings.Contains(err.Error(), "whsec") {
		t.Errorf("errors leak a secret: %v", err)
	}
	_, err = cfg.NotifySecrets(MapEnv(nil), os.ReadFile)
	if !strings.Contains(err.Error(), `notify.channels[0] "ops-hook": url_env HOOK_URL is not set`) {
		t.Errorf("unset variable: %v", err)
	}
}

func TestPrivateFilesCoverNotifySecrets(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "slack.secret")
	if err := os.WriteFile(open, []byte("s\n"), 0o644); err != nil { //nolint:gosec // G306: the readable file under test
		t.Fatal(err)
	}
	cfg := Config{Notify: Notify{Channels: []NotifyChannel{
		{Name: "slack", Type: ChannelSlack, SecretFile: open, TokenFile: filepath.Join(dir, "absent")},
	}}}
	want := []string{
		`notify.channels[0] "slack": secret_file ` + open + ` has mode 0644; want 0600 (no group or other bits)`,
		`notify.channels[0] "slack": token_file ` + filepath.Join(dir, "absent") + `: no such file or directory` + missingFileFix,
	}
	if diff := cmp.Diff(want, Lines(privateProblems(cfg, os.Geteuid()))); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestShortNotifySecrets: a webhook secret under MinWebhookSecretBytes,
// from a variable or a file, is a warning naming the channel, the source
// and the length, never the secret; one of 32 bytes, a Slack signing
// secret and an unset variable (NotifySecrets' error) are not.
func TestShortNotifySecrets(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte(" hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, notifyBase, nil)
	cfg.Notify.Channels = append(cfg.Notify.Channels, NotifyChannel{Name: "filed", Type: ChannelWebhook, URLEnv: "HOOK_URL", SecretFile: short})
	got := cfg.ShortNotifySecrets(MapEnv(map[string]string{"HOOK_SECRET": "whsec"}), os.ReadFile)
	want := []string{
		`notify.channels[0] "ops-hook": the signing secret of secret_env HOOK_SECRET is 5 bytes long; an HMAC-SHA256 key under 32 bytes (RFC 2104) weakens Toolgate-Signature: use a random one (openssl rand -hex 32 makes 64)`,
		`notify.channels[2] "filed": the signing secret of secret_file ` + short + ` is 7 bytes long; an HMAC-SHA256 key under 32 bytes (RFC 2104) weakens Toolgate-Signature: use a random one (openssl rand -hex 32 makes 64)`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ShortNotifySecrets (-want +got):\n%s", diff)
	}
	cfg.Notify.Channels = cfg.Notify.Channels[:2]
	if got := cfg.ShortNotifySecrets(MapEnv(map[string]string{"HOOK_SECRET": strings.Repeat("s", 32)}), os.ReadFile); len(got) != 0 {
		t.Errorf("a 32-byte secret: %q", got)
	}
	if got := cfg.ShortNotifySecrets(MapEnv(nil), os.ReadFile); len(got) != 0 {
		t.Errorf("an unset variable: %q", got)
	}
}

// TestEnvProblemsOfAFileWithProblems: Check returns what it decoded from a
// file with a problem of its own, and EnvProblems finds in it the token
// variable that is not set and the notification secret file that is
// missing, without repeating what Validate said (a token with two
// sources).
func TestEnvProblemsOfAFileWithProblems(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	text := strings.Replace(notifyBase, "/run/slack.secret", filepath.Join(dir, "absent.secret"), 1) + `
agents:
  - { id: bot, token_env: BOT_TOKN }
  - { id: both, token_env: BOTH, token_file: /nonexistent/both }
`
	text = strings.Replace(text, "effect: approve,", "effect: aprove,", 1)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := MapEnv(map[string]string{"ALICE": "a-token-long-enough-1", "BOB": "b-token-long-enough-2", "HOOK_URL": "https://hooks.example/x", "HOOK_SECRET": "s", "SLACK_TOKEN": "xoxb-1"})
	cfg, problems, _ := Check(path, env)
	if len(problems) == 0 {
		t.Fatal("Check found no problem in a file with effect: aprove")
	}
	files := cfg.ReadFiles(privfile.Reader{Euid: os.Geteuid()}, os.ReadFile)
	got := Lines(cfg.EnvProblems(env, files.ReadFile))
	want := []string{
		`agents[0] "bot": token_env BOT_TOKN is not set: export it in toolgate's environment or correct the name (a random token: openssl rand -hex 16)`,
		`notify.channels[1] "slack": secret_file ` + filepath.Join(dir, "absent.secret") + `: no such file or directory` + missingFileFix, // once: the check and the read are one
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EnvProblems (-want +got):\n%s", diff)
	}
}
