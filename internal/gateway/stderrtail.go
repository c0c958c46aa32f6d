package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"toolgate/internal/api"
	"toolgate/internal/approval"
)

// What of a stdio child's stderr a failed start quotes (stderrTail.text):
// its last tailLines lines, each cut to tailLineBytes and all of them to
// tailBytes, after redaction.
const (
	tailLines     = 5
	tailLineBytes = 400
	tailBytes     = 1024
)

// tailEnvMin is the shortest value of the child's environment that its
// quoted stderr shows as "[redacted: $NAME]": shorter ones ("1", "/root")
// would hide too much of a path or a number and are rarely secrets.
const tailEnvMin = 8

// A stderrTail keeps the last lines of one stdio child's stderr, so that a
// child that dies while it starts can say why in the error of the failed
// connect (issue 13's neighbour: the quickstart's filesystem server run from
// another directory). It sees what the child wrote, never a tool's
// arguments: only a start's failure quotes it, and no call has been sent by
// then. Write never fails and never blocks for long.
type stderrTail struct {
	red     *envRedactor
	stopped atomic.Bool // the start succeeded: nothing more is kept

	mu    sync.Mutex
	lines []string     // guarded by mu: the last complete lines, oldest first
	split lineSplitter // guarded by mu
}

// An envShape is text that shows the value of the environment variable
// name: the value itself, its JSON-escaped form, or one of its lines.
type envShape struct {
	text, name string
}

// newStderrTail returns a tail that redacts the values of env, the child's
// complete environment (newEnvRedactor).
func newStderrTail(env map[string]string) *stderrTail {
	return &stderrTail{red: newEnvRedactor(env)}
}

// An envRedactor hides a stdio child's environment and secret-shaped text
// in what the child writes to stderr (the log's lines, a failed start's
// tail). Its methods are safe for concurrent use.
type envRedactor struct {
	hide     []envShape       // the child's environment as it may be printed, longest first
	patterns []*regexp.Regexp // approval.DefaultRedaction's, compiled once per process

	// starts[i] is the failure function of hide[i] without its last byte
	// (trimCut), made at the first cut line: 4 bytes a byte of the shapes.
	startsOnce sync.Once
	starts     [][]int32
}

// newEnvRedactor returns a redactor of the values of env, the child's
// complete environment, in each shape a child may print them: as they are,
// JSON-escaped (JSON.stringify(process.env) and config dumps write quotes,
// backslashes and newlines escaped) and, for a value of several lines (a
// PEM key), each of its lines, since the tail is kept line by line and no
// one line holds the whole value. Shapes shorter than tailEnvMin bytes are
// left in sight.
func newEnvRedactor(env map[string]string) *envRedactor {
	t := &envRedactor{patterns: approval.DefaultRedaction().Patterns}
	seen := map[string]bool{}
	add := func(text, name string) {
		if len(text) >= tailEnvMin && !seen[text] {
			seen[text] = true
			t.hide = append(t.hide, envShape{text: text, name: name})
		}
	}
	for name, v := range env {
		add(v, name)
		add(jsonEscaped(v), name)
		for line := range strings.SplitSeq(v, "\n") {
			add(strings.TrimSuffix(line, "\r"), name)
		}
	}
	slices.SortFunc(t.hide, func(a, b envShape) int {
		return cmp.Or(cmp.Compare(len(b.text), len(a.text)), cmp.Compare(a.name, b.name), cmp.Compare(a.text, b.text))
	})
	return t
}

// jsonEscaped is s as a JSON string without its quotes, escaped as
// JSON.stringify does (no HTML escaping).
func jsonEscaped(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) != nil {
		return s // not reached: a string always encodes
	}
	q := strings.TrimSuffix(b.String(), "\n")
	return q[1 : len(q)-1]
}

// Write implements io.Writer: it splits p into lines as stderrLog does
// (each kept to maxStderrLine bytes) and keeps the last tailLines.
func (t *stderrTail) Write(p []byte) (int, error) {
	if t.stopped.Load() {
		return len(p), nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.split.write(p, t.keep)
	return len(p), nil
}

// stop ends the keeping, once the child has started: only a failed start
// quotes the tail, and a running child's lines are not copied twice.
func (t *stderrTail) stop() {
	t.stopped.Store(true)
	t.mu.Lock()
	t.lines, t.split = nil, lineSplitter{}
	t.mu.Unlock()
}

// keep adds line to lines, dropping the oldest beyond tailLines. t.mu
// must be held. A line cut at maxStderrLine needs no trimCut here: text
// quotes only its first tailLineBytes.
func (t *stderrTail) keep(line []byte, _ bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return // a blank line explains nothing and would push out one that does
	}
	if len(t.lines) == tailLines {
		t.lines = slices.Delete(t.lines, 0, 1)
	}
	t.lines = append(t.lines, string(line))
}

// text returns the kept lines (and a last line without its newline), each
// redacted, quoted and cut, newest kept when they exceed tailBytes, joined
// by " | "; "" when the child wrote nothing but blank lines.
func (t *stderrTail) text() string {
	t.mu.Lock()
	lines := slices.Clone(t.lines)
	if cur := t.split.buf; len(bytes.TrimSpace(cur)) > 0 && !t.split.skipping {
		lines = append(lines, string(cur))
	}
	t.mu.Unlock()
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	var out []string
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		q := quoteShown(cutUTF8(t.red.redact(lines[i]), tailLineBytes))
		if size+len(q) > tailBytes && len(out) > 0 {
			break
		}
		out = append(out, q)
		size += len(q) + 3
	}
	slices.Reverse(out)
	return strings.Join(out, " | ")
}

// quoteShown is strconv.Quote(s) that also writes as \u escapes the
// characters strconv counts printable but a reviewer's surfaces show escaped
// ([api.IsShownEscaped]: variation selectors, Hangul fillers and other blank
// letters), so a child's stderr quoted to an agent cannot hide text in them.
// strconv.Quote already escapes controls, bidi and zero-width characters.
func quoteShown(s string) string {
	q := strconv.Quote(s)
	if !strings.ContainsFunc(q, api.IsShownEscaped) {
		return q
	}
	var b strings.Builder
	for _, r := range q {
		switch {
		case !api.IsShownEscaped(r):
			b.WriteRune(r)
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// redact hides in line the values of the child's environment in the
// shapes newEnvRedactor made, longest first (the child may print its own
// environment, which holds the credentials it was given), and text shaped
// like a secret (approval.DefaultRedaction's patterns, as approvers'
// display copies).
func (t *envRedactor) redact(line string) string {
	for _, h := range t.hide {
		line = strings.ReplaceAll(line, h.text, "[redacted: $"+h.name+"]")
	}
	for _, re := range t.patterns {
		line = re.ReplaceAllStringFunc(line, func(string) string {
			return "[redacted: looks like " + secretWhat(re.SubexpNames()) + "]"
		})
	}
	return line
}

// trimCut returns line, a line lineSplitter cut at maxStderrLine, without
// its longest ending that is the start of a shape redact hides: a value
// that straddles the cut is not whole in the kept part, so redact would
// not find it and its first bytes would be shown. The bytes dropped are
// at most one shape's length short of it; a line that was not cut needs
// no trimming. Each shape costs time linear in its length (startAtEnd),
// not its length squared as trying each length would (2e5a812: 32 ms a
// line for 64 values of 4 KiB, BenchmarkTrimCut/repeating).
func (t *envRedactor) trimCut(line string) string {
	t.startsOnce.Do(func() {
		t.starts = make([][]int32, len(t.hide))
		for i, h := range t.hide {
			t.starts[i] = failure(h.text[:len(h.text)-1])
		}
	})
	drop := 0
	for i, h := range t.hide {
		if len(h.text)-1 <= drop {
			break // shapes are longest first: none left can drop more
		}
		drop = max(drop, startAtEnd(line, h.text[:len(h.text)-1], t.starts[i]))
	}
	return line[:len(line)-drop]
}

// failure returns p's Knuth–Morris–Pratt failure function: for each i, the
// length of the longest proper start of p[:i+1] that p[:i+1] ends with.
func failure(p string) []int32 {
	pi := make([]int32, len(p))
	for i, j := 1, int32(0); i < len(p); i++ {
		for j > 0 && p[i] != p[j] {
			j = pi[j-1]
		}
		if p[i] == p[j] {
			j++
		}
		pi[i] = j
	}
	return pi
}

// startAtEnd returns the length of the longest start of p that s ends with
// (0 when none), in time linear in len(p): the automaton of p (pi, its
// failure function) run over the last len(p) bytes of s.
func startAtEnd(s, p string, pi []int32) int {
	j := int32(0)
	for i := max(0, len(s)-len(p)); i < len(s); i++ {
		if int(j) == len(p) {
			j = pi[j-1] // a whole p, not at the end: keep looking
		}
		for j > 0 && s[i] != p[j] {
			j = pi[j-1]
		}
		if s[i] == p[j] {
			j++
		}
	}
	return int(j)
}

// secretWhat names what a redaction pattern finds, from its first named
// group ("a_GitHub_token" says "a GitHub token").
func secretWhat(names []string) string {
	for _, n := range names {
		if n != "" {
			return strings.ReplaceAll(n, "_", " ")
		}
	}
	return "a secret"
}

// cutUTF8 returns s cut to at most n bytes on a rune boundary, with "…"
// when something was cut.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return runePrefix(s, n) + "…"
}

// runePrefix returns the longest prefix of s of at most n bytes (n <
// len(s)) that ends on a rune boundary.
func runePrefix(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
