package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/api"
)

// dyingScript is a stdio upstream that explains on stderr why it cannot
// start, echoing its own credentials on the way, and exits with status 3
// before it reads initialize (the quickstart's filesystem server given a
// relative directory, started from elsewhere).
const dyingScript = `echo "line one" >&2
echo "line two" >&2
echo >&2
echo "env: API_TOKEN=$API_TOKEN" >&2
echo "using ghp_abcdefghijklmnopqrstuvwxyz0123456789" >&2
echo "Error: ENOENT: no such file or directory, stat 'examples/sandbox'" >&2
echo "Usage: mcp-server-filesystem [allowed-directory] [additional-directories...]" >&2
printf 'exiting' >&2
exit 3`

// TestStdioStartFailureSaysWhy: a real child that writes why it fails to
// stderr and exits before initialize makes ONE warning that says so (its
// exit status and its last five non-blank stderr lines, with its
// environment's values and secret-shaped text redacted), and an agent's
// call of one of its tools is told the same in the "unavailable" text.
func TestStdioStartFailureSaysWhy(t *testing.T) {
	const token = "tok-0123456789abcdef"
	dying := ServerConfig{Name: "fs", Command: "/bin/sh", Args: []string{"-c", dyingScript},
		Env: map[string]string{"API_TOKEN": token, "PATH": "/usr/bin:/bin"}}
	var logs logBuffer
	g := newGateway(t, []ServerConfig{dying, {Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(),
		&Options{RestartMin: time.Hour, HealthInterval: time.Hour, TerminateGrace: 10 * time.Second, Logger: logs.logger()})
	logs.waitFor(t, `msg="upstream unavailable; reconnecting" server=fs`)
	// The child's own lines are logged too, every one (drained from the
	// start, not only once the first connects are over).
	logs.waitFor(t, `msg="upstream stderr" server=fs line="line one"`)
	// Logged redacted as the warning quotes them (on the base the token
	// was in the log, in the line the child wrote).
	logs.waitFor(t, `msg="upstream stderr" server=fs line="Usage: mcp-server-filesystem`)
	if want := `line="env: API_TOKEN=[redacted: $API_TOKEN]"`; !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not show %s: %s", want, logs.String())
	}
	if strings.Contains(logs.String(), token) || strings.Contains(logs.String(), "ghp_abc") {
		t.Errorf("the log shows the child's token: %s", logs.String())
	}

	var warn string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `msg="upstream unavailable; reconnecting" server=fs`) {
			warn = line
		}
	}
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs__read_text_file", Arguments: map[string]any{"path": "notes.txt"}})
	if err != nil || !res.IsError {
		t.Fatalf("fs__read_text_file: %+v %v, want an isError result", res, err)
	}
	text := textOf(t, res)
	wantUnavailable(t, "fs", text)

	// The log quotes with slog's escaping, the answer as it is.
	for where, got := range map[string]string{"log line": warn, "answer": text} {
		q := func(s string) string {
			s = fmt.Sprintf("%q", s)
			if where == "log line" {
				s = strings.ReplaceAll(s, `"`, `\"`)
			}
			return s
		}
		for _, want := range []string{
			"exit status 3",
			q("env: API_TOKEN=[redacted: $API_TOKEN]"),
			q("using [redacted: looks like a GitHub token]"),
			q("Error: ENOENT: no such file or directory, stat 'examples/sandbox'"),
			q("Usage: mcp-server-filesystem [allowed-directory] [additional-directories...]"),
			q("exiting"),
		} {
			if !strings.Contains(got, want) {
				t.Errorf("%s %q does not say %s", where, got, want)
			}
		}
		for _, not := range []string{token, "ghp_abc", "line one", "line two", "notes.txt"} {
			if strings.Contains(got, not) {
				t.Errorf("%s %q shows %q", where, got, not)
			}
		}
	}
}

// TestStderrTailBounds: the tail keeps the last five non-blank lines, cuts
// each to tailLineBytes and drops the oldest past tailBytes, and a line
// longer than maxStderrLine keeps its start only.
func TestStderrTailBounds(t *testing.T) {
	tail := newStderrTail(nil)
	long := strings.Repeat("é", maxStderrLine) // 2 bytes each: cut at maxStderrLine bytes
	fmt.Fprintf(tail, "first\n%s\nmid\r\n\n   \n", long)
	for i := range 3 {
		fmt.Fprintf(tail, "%c%s\n", 'a'+i, strings.Repeat("x", 300))
	}
	got := tail.text()
	parts := strings.Split(got, " | ")
	if len(parts) != 4 {
		t.Fatalf("text has %d lines, want 4 (the oldest two of five dropped at %d bytes): %q", len(parts), tailBytes, got)
	}
	if len(got) > tailBytes+3*3 {
		t.Errorf("text is %d bytes, want at most about %d", len(got), tailBytes)
	}
	if want := `"mid"`; parts[0] != want {
		t.Errorf("oldest kept line = %q, want %q", parts[0], want)
	}
	if want := fmt.Sprintf("%q", "c"+strings.Repeat("x", 300)); parts[3] != want {
		t.Errorf("newest line = %q, want %q", parts[3], want)
	}

	tail = newStderrTail(nil)
	fmt.Fprintf(tail, "%s\n", long)
	if want := fmt.Sprintf("%q", strings.Repeat("é", tailLineBytes/2)+"…"); tail.text() != want {
		t.Errorf("a long line reads %q, want %q", tail.text(), want)
	}
	if got := newStderrTail(nil).text(); got != "" {
		t.Errorf("empty tail reads %q", got)
	}
	tail.stop()
	fmt.Fprintf(tail, "after the start\n")
	if got := tail.text(); got != "" {
		t.Errorf("a stopped tail reads %q", got)
	}
}

// TestStderrTailEscapesHidden: a failed start quotes the child's stderr
// with every character a reviewer's surfaces show escaped written as an
// escape: bidi overrides and zero-width characters (strconv.Quote did
// these on a33a630b too) and the blank letters and variation selectors
// strconv counts printable (U+3164, U+FE0F: shown as they were on
// a33a630b).
func TestStderrTailEscapesHidden(t *testing.T) {
	tail := newStderrTail(nil)
	fmt.Fprint(tail, "bad \u202egnp.exe\u200b at \u3164 and \ufe0f and \U000e0100 ok é\n")
	got := tail.text()
	if i := strings.IndexFunc(got, api.IsShownEscaped); i >= 0 {
		t.Errorf("the tail %q holds %q at %d", got, []rune(got[i:])[0], i)
	}
	if u, err := strconv.Unquote(got); err != nil || !strings.HasPrefix(u, "bad \u202egnp.exe\u200b at \u3164") {
		t.Errorf("the tail %q unquotes to %q, %v: want the line back", got, u, err)
	}
	if !strings.Contains(got, "é") {
		t.Errorf("the tail %q escapes a plain letter", got)
	}
}

// TestStderrTailRedactsEnvAsPrinted: a child that prints a value of its
// environment in another shape than the value's own bytes is redacted
// too: a multi-line value (a PEM key) printed as it is arrives one line
// at a time, and none of the lines is the whole value; the same value,
// or one with quotes and backslashes, printed JSON-escaped on one line
// (JSON.stringify(process.env), a config dump) has other bytes. On the
// base each of these showed the key's lines or the password to agents.
func TestStderrTailRedactsEnvAsPrinted(t *testing.T) {
	body := []string{
		"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2",
		"d3h5ejAxMjM0NTY3ODlBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWmFiY2RlZmdo",
		"aWprbG1ub3BxcnN0dXZ3eHl6MDEyMzQ1Njc4OUFCQ0RFRkdISUpLTE1OT1BRUlNU",
		"VVZXWFlaYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=",
	}
	key := "-----BEGIN PRIVATE KEY-----\n" + strings.Join(body, "\n") + "\n-----END PRIVATE KEY-----\n"
	const pass = `pa"ss\w0rd<&>`
	for name, printed := range map[string]string{
		"key as is":      key,
		"key as JSON":    fmt.Sprintf(`{"SIGNING_KEY":%s}`+"\n", jsStringify(t, key)),
		"key, CRLF":      strings.ReplaceAll(key, "\n", "\r\n"),
		"password JSON":  fmt.Sprintf(`config: {"DB_PASSWORD":%s}`+"\n", jsStringify(t, pass)),
		"password plain": "config: DB_PASSWORD=" + pass + "\n",
	} {
		tail := newStderrTail(map[string]string{"SIGNING_KEY": key, "DB_PASSWORD": pass})
		fmt.Fprint(tail, printed)
		got := tail.text()
		for _, secret := range append(slices.Clone(body), "w0rd") {
			if strings.Contains(got, secret) {
				t.Errorf("%s: the tail %q shows %q", name, got, secret)
			}
		}
		if !strings.Contains(got, "[redacted: ") {
			t.Errorf("%s: the tail %q says nothing was redacted", name, got)
		}
	}
}

// jsStringify is v as JSON.stringify writes it: no HTML escaping.
func jsStringify(t *testing.T, v string) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
