package approval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Redaction says what the display copy of tool arguments hides or shortens.
// The zero value hides nothing and never truncates. See DefaultRedaction.
//
// A key is compared after normalizing it: lowercased, with every rune that is
// not a letter or a digit removed (so "X-Api-Key", "x_api_key" and
// "x\u200bapikey" all read "xapikey").
type Redaction struct {
	// Keys are normalized substrings: a member whose normalized key contains
	// one has its whole value (any type, the whole subtree) redacted.
	Keys []string
	// ExactKeys are normalized keys that are secret only when the whole key
	// equals them: short words that would over-match as substrings ("auth"
	// is in "author", "pin" in "spinner").
	ExactKeys []string
	// ExceptKeys are normalized keys never redacted by key name, for common
	// harmless keys that a substring would otherwise catch ("max_tokens").
	// String values under them are still checked against Patterns.
	ExceptKeys []string
	// Patterns match secret-shaped text inside any string value; each match
	// is replaced by the redaction marker. The reason shown is taken from the
	// pattern's first named group with underscores read as spaces, so
	// (?P<a_JWT>…) gives "looks like a JWT"; an unnamed pattern gives "looks
	// like a secret". A pattern must not match an empty stretch of text
	// (internal/config refuses one): its markers would hide nothing.
	Patterns []*regexp.Regexp
	// MaxString is the most characters (runes) of a string value shown;
	// longer ones are cut with a visible marker. 0 or less means no limit.
	MaxString int
}

// DefaultRedaction returns the redaction used unless configured otherwise.
//
// Keys (substring of the normalized key): password, passwd, passphrase,
// secret, token, apikey, accesskey, authkey, privatekey, signingkey,
// encryptionkey, authorization, cookie, credential, sessionid, sessionkey.
// ExactKeys: auth, pass, pwd, pin, otp, cvv, cvc. ExceptKeys: the usual
// LLM token-count parameters (maxtokens, maxnewtokens, maxoutputtokens,
// maxcompletiontokens, maxinputtokens, numtokens, tokencount, tokenlimit).
//
// Patterns: "Bearer <token>" (8+ token characters; Bearer, bearer or
// BEARER), JWTs (eyJ….….…), PEM private key blocks (to the END line, or to
// the end of the string when it is cut), AWS access key ids (AKIA/ASIA +
// 16), GitHub tokens (ghp_/gho_/ghu_/ghs_/ghr_, github_pat_), Slack tokens
// (xox?-), API keys shaped like sk-…, sk_live_…, rk_live_… (OpenAI,
// Anthropic, Stripe), Google API keys (AIza…), and the "//user:password@"
// part of URLs. Patterns match anywhere, also inside longer words: they
// err towards hiding.
//
// MaxString is 4096.
func DefaultRedaction() Redaction {
	return Redaction{
		Keys: []string{
			"password", "passwd", "passphrase", "secret", "token", "apikey",
			"accesskey", "authkey", "privatekey", "signingkey", "encryptionkey",
			"authorization", "cookie", "credential", "sessionid", "sessionkey",
		},
		ExactKeys: []string{"auth", "pass", "pwd", "pin", "otp", "cvv", "cvc"},
		ExceptKeys: []string{
			"maxtokens", "maxnewtokens", "maxoutputtokens", "maxcompletiontokens",
			"maxinputtokens", "numtokens", "tokencount", "tokenlimit",
		},
		// Compiled once (defaultPatterns), in a slice of the caller's own
		// (config appends the configured patterns).
		Patterns:  slices.Clone(defaultPatterns()),
		MaxString: 4096,
	}
}

// defaultPatterns compiles DefaultRedaction's patterns once per process:
// compiling them cost ≈ 0.9 ms of CPU, and each stdio upstream process
// start compiled them twice (its stderr log's and its failure tail's
// redactor; branch approve44), as did every gate, audit trail and
// configuration load. A *regexp.Regexp is safe for concurrent use and
// nothing here calls its one mutating method (Longest).
var defaultPatterns = sync.OnceValue(func() []*regexp.Regexp {
	// Each pattern starts with a literal so that regexp can skip ahead
	// with a substring search: a leading \b or (?i) would make every
	// pattern an NFA walk over the whole string (≈70 ms per 2 MiB).
	return []*regexp.Regexp{
		regexp.MustCompile(`(?P<a_bearer_token>Bearer[ \t]+[A-Za-z0-9\-._~+/]{8,}=*)`),
		regexp.MustCompile(`(?P<a_bearer_token>bearer[ \t]+[A-Za-z0-9\-._~+/]{8,}=*)`),
		regexp.MustCompile(`(?P<a_bearer_token>BEARER[ \t]+[A-Za-z0-9\-._~+/]{8,}=*)`),
		regexp.MustCompile(`(?P<a_JWT>eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)`),
		regexp.MustCompile(`(?P<a_private_key>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*$))`),
		regexp.MustCompile(`(?P<an_AWS_access_key_id>AKIA[0-9A-Z]{16})`),
		regexp.MustCompile(`(?P<an_AWS_access_key_id>ASIA[0-9A-Z]{16})`),
		regexp.MustCompile(`(?P<a_GitHub_token>gh(?:[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,}))`),
		regexp.MustCompile(`(?P<a_Slack_token>xox[abposr]-[A-Za-z0-9-]{10,})`),
		regexp.MustCompile(`(?P<an_API_key>sk(?:-|_live_|_test_)[A-Za-z0-9_-]{20,})`),
		regexp.MustCompile(`(?P<an_API_key>rk_(?:live|test)_[A-Za-z0-9_-]{20,})`),
		regexp.MustCompile(`(?P<a_Google_API_key>AIza[0-9A-Za-z_-]{35})`),
		regexp.MustCompile(`(?P<credentials_in_a_URL>//[^\s/:@]*:[^\s/@]+@)`),
	}
})

// Display returns the display copy of the tool arguments raw: the copy shown
// to approvers and stored, while the hash (see Hash) always covers the real
// arguments. The copy is compact JSON with the same structure, key order
// and number literals as raw, except that:
//
//   - the value of a member whose key looks secret (see Redaction) is
//     replaced, whole subtree and all, by the string `[redacted: key "<k>"]`,
//     where <k> is the matching entry of the Redaction lists;
//   - in a member key that a Redaction pattern matches, each match is
//     replaced by `[redacted key <n>]` (a key that is only a secret becomes
//     just the marker; the rest of the key stays in sight, as in a string
//     value), n numbering the object's hidden keys from 1 up, skipping any
//     number that would show a key of the object as received or one shown
//     for an earlier key, so that the copy's keys stay unique; the member's
//     value is shown (and redacted by the key as received) as for any
//     other member;
//   - text inside a string that matches a Redaction pattern is replaced by
//     `[redacted: looks like <what>]` (a string that is only a secret becomes
//     just the marker); every pattern looks in the text as received, and
//     text that the matches of several cover in overlapping parts is one
//     marker, <what> from the match that starts first (as in keys);
//   - a string longer than MaxString runes is cut, with a marker saying how
//     long it was, and a warning that the cut is for display only;
//   - control characters (C0, DEL, C1), format characters (Unicode
//     category Cf: bidi controls, zero-width and invisible characters, tag
//     characters, U+FEFF…), line and paragraph separators and a few blank
//     letters (U+034F, U+115F, U+1160, U+17B4, U+17B5, U+3164, U+FFA0) are
//     written as \uXXXX escapes with uppercase hex (\t, \n and \r keep their
//     short escapes) in strings and keys, so decoding the copy gives back
//     the original text while the JSON text shows them. Each string (or key)
//     that has one gets a warning per distinct character, such as
//     `$.to: contains U+200B ZERO WIDTH SPACE`.
//
// Two keys of one object that are equal under simple case folding
// (policy.FoldKey: "path" and "PATH", "s" and "ſ") get a warning naming
// both as shown: an upstream decoding with Go's encoding/json reads them
// as one field, the last, and policy conditions read neither (the
// arguments are an error there; docs/policy.md).
//
// Locations are JSONPath-like: $ is the root, .name or ["name"] a member and
// [i] an array element. Warnings are in document order, without repeats,
// and never nil. Empty or nil raw displays as {}. Errors wrap ErrInvalidJSON
// or ErrDuplicateKey, as for Canonicalize.
func Display(raw json.RawMessage, rd Redaction) (json.RawMessage, []string, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	t, err := parse(raw)
	if err != nil {
		return nil, nil, err
	}
	disp, warnings := display(&t, len(raw), rd)
	return disp, warnings, nil
}

// A ShownArguments is what HashDisplayCanonical gives for arguments.
type ShownArguments struct {
	Hash     string          // Hash(raw)
	Display  json.RawMessage // Display(raw, rd)'s copy
	Warnings []string        // Display(raw, rd)'s warnings
	// Canonical is Canonicalize(Display), and Depth the nesting of
	// arrays and objects in Display (0 for a scalar): the audit trail
	// records the display copy in canonical form.
	Canonical json.RawMessage
	Depth     int
}

// HashDisplayCanonical is HashDisplay, and the display copy's canonical
// form, from one parse of raw: the copy's canonical form is written from
// the parsed tree with the display's changes (redacted values, hidden
// text, cuts) made in it, where Canonicalize would parse the copy again
// (issue 13: for the audit record of every allowed call).
func HashDisplayCanonical(raw json.RawMessage, rd Redaction) (ShownArguments, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	t, err := parse(raw)
	if err != nil {
		return ShownArguments{}, err
	}
	hash := hashTree(&t, len(raw)) // before the display changes t
	d := displayer{t: &t, rd: &rd, warnings: []string{}, rewrite: true}
	d.write(len(raw))
	w := canonWriter{t: &t, buf: make([]byte, 0, len(d.buf))}
	w.value(t.root)
	return ShownArguments{Hash: hash, Display: json.RawMessage(d.buf), Warnings: d.warnings,
		Canonical: json.RawMessage(w.buf), Depth: d.depth}, nil
}

// display writes the display copy of the parsed t (size: the length of
// its source, a capacity hint).
func display(t *tree, size int, rd Redaction) (json.RawMessage, []string) {
	d := displayer{t: t, rd: &rd, warnings: []string{}, folds: true}
	d.write(size)
	return json.RawMessage(d.buf), d.warnings
}

// write writes the display copy of d.t into d.buf.
func (d *displayer) write(size int) {
	d.buf = make([]byte, 0, displaySize(d.t, size, d.rd.MaxString))
	var shallow [8]pathStep // the path, on the stack while it is shallow
	d.value(d.t.root, shallow[:0])
}

// displaySize estimates the length of the display copy of t (size: the
// length of its source): the source's, less what cutting its long strings
// to limit runes (4 bytes each at most) and a marker removes.
func displaySize(t *tree, size, limit int) int {
	if limit <= 0 {
		return size
	}
	for _, n := range t.long {
		size -= max(0, n-(4*limit+128))
	}
	return size
}

type displayer struct {
	t        *tree
	rd       *Redaction
	buf      []byte
	warnings []string
	seen     map[string]bool // made by the first warning
	// rewrite makes the tree what the copy shows (HashDisplayCanonical):
	// a string as shown, a redacted value as its marker.
	rewrite bool
	depth   int // the copy's deepest nesting of arrays and objects
	// folds makes the display warn about keys of one object that fold
	// together (warnFolds): for the approver's copy (display), not the
	// audit record of every allowed call (HashDisplayCanonical).
	folds bool
	// ix is the patterns' prefix index (index), made for the first key
	// or long string; held by value: the displayer stays on the stack.
	ix     prefixIndex
	ixMade bool
}

// A pathStep is one step of the path from the root to a value: into a
// member (key) or an element (index). The display passes the path down
// and writes it out (location) only for a warning: building each member's
// path as a string cost an allocation per member (issue 13).
type pathStep struct {
	key   string
	index int
	elem  bool
}

// location is the JSONPath-like location of the value being written: $,
// then .name or ["name"] per member and [i] per element.
func location(steps []pathStep) string {
	path := "$"
	for _, st := range steps {
		if st.elem {
			path += "[" + strconv.Itoa(st.index) + "]"
		} else {
			path = memberPath(path, st.key)
		}
	}
	return path
}

func (d *displayer) warn(w string) {
	if !d.seen[w] {
		if d.seen == nil {
			d.seen = make(map[string]bool)
		}
		d.seen[w] = true
		d.warnings = append(d.warnings, w)
	}
}

// value writes t.nodes[i], at path.
func (d *displayer) value(i uint32, path []pathStep) {
	t := d.t
	switch n := t.nodes[i]; n.kind {
	case kindLiteral, kindNumber:
		d.buf = append(d.buf, t.text(n)...)
	case kindString, kindASCII, kindEscString, kindOwnString:
		if text := t.text(n); d.rewrite {
			if s := d.str(text, n.kind == kindASCII, path); s != text {
				t.own(i, s)
			}
		} else {
			d.str(text, n.kind == kindASCII, path)
		}
	case kindArray:
		d.deeper(path)
		d.buf = append(d.buf, '[')
		for k := range n.b {
			if k > 0 {
				d.buf = append(d.buf, ',')
			}
			d.value(n.a+k, append(path, pathStep{index: int(k), elem: true}))
		}
		d.buf = append(d.buf, ']')
	case kindObject:
		d.deeper(path)
		d.buf = append(d.buf, '{')
		var hidden hiddenKeys // the keys hidden so far in this object
		for k := range n.b {
			if k > 0 {
				d.buf = append(d.buf, ',')
			}
			d.member(n, n.a+2*k, &hidden, path)
		}
		if d.folds && n.b > 1 {
			d.warnFolds(n, &hidden, path)
		}
		if d.rewrite {
			// After the loop: keyShown compares each shown key with the
			// object's keys as received.
			for _, h := range hidden.keys {
				t.own(h.i, h.marker)
			}
		}
		d.buf = append(d.buf, '}')
	}
}

// A hiddenKey is a member key of an object that the copy shows as marker
// (keyShown): t.nodes[i].
type hiddenKey struct {
	i      uint32
	marker string
}

// hiddenKeys are the keys of one object hidden so far, with what keyShown
// needs to number the next one in time independent of the object's size:
// taken (built on the first hidden key) holds the object's keys as
// received that hold a marker's text, and every key shown for a hidden
// one; last is the number of the last marker given (markers are given in
// increasing order).
type hiddenKeys struct {
	keys  []hiddenKey
	taken map[string]struct{}
	last  int
}

// member writes the member of obj whose key is t.nodes[i] and value
// t.nodes[i+1], at path (obj's). A key that a pattern matches is shown
// with its matches hidden by a marker (keyShown), added to hidden.
func (d *displayer) member(obj node, i uint32, hidden *hiddenKeys, path []pathStep) {
	key := d.t.text(d.t.nodes[i])
	what, hide := d.keyPattern(key)
	shown := key
	var spans []span
	if hide {
		shown, spans = d.keyShown(key, obj, hidden)
		hidden.keys = append(hidden.keys, hiddenKey{i: i, marker: shown})
	}
	path = append(path, pathStep{key: shown})
	fakes := d.lookAlikes(shown, spans, path)
	switch {
	case hide:
		d.warnInvisible(shown, path, "key contains")
		d.buf = appendMarkedString(d.buf, shown, fakes)
		d.warn(fmt.Sprintf("%s: key hidden (looks like %s); the hash covers the real key", location(path), what))
	case d.t.nodes[i].kind == kindASCII && fakes == nil: // nothing to flag or escape
		d.buf = append(append(append(d.buf, '"'), key...), '"')
	default:
		d.warnInvisible(key, path, "key contains")
		d.buf = appendMarkedString(d.buf, key, fakes)
	}
	d.buf = append(d.buf, ':')
	d.memberValue(i, key, path)
}

// index is the patterns' prefix index, made on the first call.
func (d *displayer) index() *prefixIndex {
	if !d.ixMade {
		d.ix.add(d.rd.Patterns)
		d.ixMade = true
	}
	return &d.ix
}

// keyPattern reports whether a Redaction pattern matches the key k, and
// what that pattern finds (patternWhat). The patterns' prefix index
// (prefixIndex.pairs) rules out in one pass over k the patterns whose
// prefix k lacks: a key none can match costs no regexp and no substring
// search per pattern.
func (d *displayer) keyPattern(k string) (string, bool) {
	if len(d.rd.Patterns) == 0 {
		return "", false
	}
	found := d.index().pairs(k)
	if found == 0 && len(d.rd.Patterns) <= 64 {
		return "", false
	}
	for j, re := range d.rd.Patterns {
		if mayMatch(j, re, k, found, true) && re.MatchString(k) {
			return patternWhat(re), true
		}
	}
	return "", false
}

// keyShown is the text shown for key, the next key hidden in obj: key
// with each Redaction pattern's matches replaced by "[redacted key <m>]",
// m the least number after the last marker's (from 1) for which that text
// is neither a key of obj as received nor shown for an earlier key of it,
// so that the copy's keys stay unique (Canonicalize and the audit refuse
// duplicates). The patterns' matches are those in key as received, the
// text they cover hidden as in a string value (hideMatches). Only the
// matches are hidden, as in a string value: a whole
// key hidden for a token-shaped part of it would let an agent keep any
// key's text (a path in a map of files) out of the reviewer's sight
// (attack31). A text shown for a hidden key holds a marker, so only keys
// as received that hold a marker's text can be the same.
func (d *displayer) keyShown(key string, obj node, hidden *hiddenKeys) (string, []span) {
	if hidden.taken == nil {
		hidden.taken = make(map[string]struct{})
		for k := range obj.b {
			if s := d.t.text(d.t.nodes[obj.a+2*k]); strings.Contains(s, "[redacted key ") {
				hidden.taken[s] = struct{}{}
			}
		}
	}
	var ms []match
	for j, re := range d.rd.Patterns {
		if mayMatch(j, re, key, 0, false) {
			ms = appendMatches(ms, re, j, key)
		}
	}
	for m := hidden.last + 1; ; m++ {
		marker := "[redacted key " + strconv.Itoa(m) + "]"
		var spans []span
		shown := hideMatches(key, ms, func(int) string { return marker }, &spans)
		if _, ok := hidden.taken[shown]; !ok {
			hidden.taken[shown] = struct{}{}
			hidden.last = m
			return shown, spans
		}
	}
}

// memberValue writes the value t.nodes[i+1] of the member whose key, as
// received, is key, at path (the member's).
func (d *displayer) memberValue(i uint32, key string, path []pathStep) {
	if why, ok := d.rd.secretKey(key); ok {
		marker := "[redacted: key " + strconv.Quote(why) + "]"
		d.buf = appendDisplayString(d.buf, marker)
		if d.rewrite {
			d.t.own(i+1, marker)
		}
		// The agent chooses key names: tell the reviewer a value is
		// hidden, so hiding cannot pass unnoticed.
		d.warn(fmt.Sprintf("%s: value hidden (key %q); the hash covers the real value", location(path), why))
		return
	}
	d.value(i+1, path)
}

// deeper notes an array or object at the end of path.
func (d *displayer) deeper(path []pathStep) {
	d.depth = max(d.depth, len(path)+1)
}

// str writes the string s at path as the copy shows it, and returns that;
// ascii says s is printable ASCII only (kindASCII).
//
// A string that is not printable ASCII is walked once (scan) for its
// flagged runes, its length in runes and, from scanPatternsFrom bytes on,
// the patterns' literal prefixes: a pattern whose prefix it lacks cannot
// match and is not run. Every pattern looks for its matches in s as
// received; the text their matches cover, overlapping ones together, is
// hidden (hideMatches), and the new s is walked again.
func (d *displayer) str(s string, ascii bool, path []pathStep) string {
	var sc stringScan
	scanned, indexed := false, false // sc is s's; sc.found too
	long := len(s) >= scanPatternsFrom && len(d.rd.Patterns) > 0
	if !ascii || long {
		var ix *prefixIndex
		if long {
			ix = d.index()
		}
		sc, scanned, indexed = scan(s, ix), true, ix != nil
	}
	var ms []match
	for k, re := range d.rd.Patterns {
		if !mayMatch(k, re, s, sc.found, indexed) || !re.MatchString(s) {
			continue
		}
		ms = appendMatches(ms, re, k, s)
		d.warn(fmt.Sprintf("%s: text hidden (looks like %s); the hash covers the real value", location(path), patternWhat(re)))
	}
	var spans []span // the markers written in s
	if len(ms) > 0 {
		s = hideMatches(s, ms, func(k int) string { return "[redacted: looks like " + patternWhat(d.rd.Patterns[k]) + "]" }, &spans)
		ascii, scanned = false, false
	}
	if !ascii {
		if !scanned {
			sc = scan(s, nil)
		}
		d.warnRunes(sc.flagged, path, "contains")
	}
	cut := false
	if limit := d.rd.MaxString; limit > 0 && len(s) > limit { // bytes ≥ runes: a cheap first test
		count, at := len(s), limit // ASCII: a byte per rune
		if !ascii {
			count, at = sc.runes, 0
			for range min(limit, count) {
				_, size := utf8.DecodeRuneInString(s[at:])
				at += size
			}
		}
		if count > limit {
			cut = true
			for len(spans) > 0 && spans[len(spans)-1].start >= at {
				spans = spans[:len(spans)-1] // cut off
			}
			if n := len(spans); n > 0 && spans[n-1].end > at {
				spans[n-1].end = at // cut into: what is left is still the copy's
			}
			note := fmt.Sprintf("…[truncated for display: %d of %d characters shown]", limit, count)
			spans = append(spans, span{at, at + len(note)})
			s = s[:at] + note
			d.warn(fmt.Sprintf("%s: string of %d characters truncated to %d for display only; the hash covers the full value", location(path), count, limit))
		}
	}
	fakes := d.lookAlikes(s, spans, path)
	if ascii && !cut && fakes == nil {
		d.buf = append(append(append(d.buf, '"'), s...), '"')
	} else {
		d.buf = appendMarkedString(d.buf, s, fakes)
	}
	return s
}

// A span is the bytes [start, end) of a marker the copy wrote in a string.
type span struct{ start, end int }

// lookAlikes returns where, in s as the copy shows it at path, the
// agent's own text starts like a marker: each '[' outside the markers
// written (spans, in order) that begins "[redacted" or "[truncated for
// display". The copy writes those as \u005B (appendMarkedString), so
// that its text tells the two apart (the detail page shows only the
// copy's markers as markers) while decoding it still gives the text
// back, and warns once for s. Nil when there is none (the usual case:
// one IndexByte).
func (d *displayer) lookAlikes(s string, spans []span, path []pathStep) []int {
	if strings.IndexByte(s, '[') < 0 {
		return nil
	}
	var at []int
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '[')
		if j < 0 {
			break
		}
		p := i + j
		i = p + 1
		for len(spans) > 0 && spans[0].end <= p {
			spans = spans[1:]
		}
		if len(spans) > 0 && p >= spans[0].start {
			i = spans[0].end // in a marker the copy wrote
			continue
		}
		if rest := s[p+1:]; strings.HasPrefix(rest, "redacted") || strings.HasPrefix(rest, "truncated for display") {
			at = append(at, p)
		}
	}
	if at != nil {
		d.warn(fmt.Sprintf(`%s: text written like a redaction marker, shown with its "[" as \u005B; it is the agent's text, not hidden by toolgate`, location(path)))
	}
	return at
}

// appendMarkedString is appendDisplayString, with the '[' at each of the
// byte offsets fakes of s (lookAlikes) written \u005B.
func appendMarkedString(b []byte, s string, fakes []int) []byte {
	if fakes == nil {
		return appendDisplayString(b, s)
	}
	b = append(b, '"')
	last := 0
	for _, p := range fakes {
		b = appendU(appendDisplayBody(b, s[last:p]), '[')
		last = p + 1
	}
	return append(appendDisplayBody(b, s[last:]), '"')
}

// warnInvisible adds one warning per distinct flagged rune in s, in order of
// first appearance. Tab and line feed are escaped but not warned about: they
// are ordinary in multi-line content (a file body, a script), and the JSON
// display copy shows them as \t and \n, so they cannot hide text.
func (d *displayer) warnInvisible(s string, path []pathStep, verb string) {
	d.warnRunes(scan(s, nil).flagged, path, verb)
}

// quietASCII marks the ASCII bytes that are never warned about: printable
// ASCII, tab and line feed.
var quietASCII = func() (q [256]bool) {
	for c := 0x20; c < 0x7F; c++ {
		q[c] = true
	}
	q['\t'], q['\n'] = true, true
	return q
}()

func containsRune(rs []rune, r rune) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// secretKey reports whether the member key k must be redacted, and the
// Redaction entry that matched.
func (rd *Redaction) secretKey(k string) (string, bool) {
	if len(rd.Keys) == 0 && len(rd.ExactKeys) == 0 {
		return "", false
	}
	nk := normalizeKey(k)
	for _, e := range rd.ExceptKeys {
		if nk == e {
			return "", false
		}
	}
	for _, e := range rd.ExactKeys {
		if nk == e {
			return e, true
		}
	}
	for _, e := range rd.Keys {
		if e != "" && strings.Contains(nk, e) {
			return e, true
		}
	}
	return "", false
}

// normalizeKey lowercases k and drops every rune that is not a letter or digit.
func normalizeKey(k string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, k)
}

// patternWhat names what a Redaction pattern finds, from its first named group.
func patternWhat(re *regexp.Regexp) string {
	for _, name := range re.SubexpNames() {
		if name != "" {
			return strings.ReplaceAll(name, "_", " ")
		}
	}
	return "a secret"
}

// memberPath extends path with the member key k: .k for identifier-like
// keys, ["k"] (with the display escaping) otherwise.
func memberPath(path, k string) string {
	if isIdent(k) {
		return path + "." + k
	}
	var b bytes.Buffer
	b.WriteString(path)
	b.WriteByte('[')
	b.Write(appendDisplayString(b.AvailableBuffer(), k))
	b.WriteByte(']')
	return b.String()
}

// isIdent reports whether k matches [A-Za-z_][A-Za-z0-9_]*.
func isIdent(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return k != ""
}

const upperHex = "0123456789ABCDEF"

// plainASCII marks the bytes a display string copies as they are:
// printable ASCII but '"' and '\\'. The others are escaped, or (0x80 and
// up) start a rune that is decoded and checked.
var plainASCII = func() (q [256]bool) {
	for c := 0x20; c < 0x7F; c++ {
		q[c] = c != '"' && c != '\\'
	}
	return q
}()

// safeLead is, for the first byte of a UTF-8 sequence whose every rune is
// shown as it is (none is flagged), the sequence's length; 0 for the
// others. Text in most scripts (Latin, Greek, Cyrillic, Hebrew, CJK, …)
// is skipped without decoding a rune.
var safeLead = func() (t [256]uint8) {
	for c := 0xC3; c <= 0xDF; c++ { // U+00C0–U+07FF but for U+034F, U+0600–U+0605, U+061C, U+06DD, U+070F
		if c != 0xCD && c != 0xD8 && c != 0xDB && c != 0xDC {
			t[c] = 2
		}
	}
	for c := 0xE4; c <= 0xEE; c++ { // U+4000–U+EFFF
		t[c] = 3
	}
	t[0xF1], t[0xF2], t[0xF4] = 4, 4, 4 // U+40000–U+BFFFF, U+100000–U+10FFFF
	return t
}()

// appendDisplayString appends s (valid UTF-8) as a JSON string in which
// every flagged rune is a \uXXXX escape (a surrogate pair above U+FFFF),
// copying the runs between them.
func appendDisplayString(b []byte, s string) []byte {
	return append(appendDisplayBody(append(b, '"'), s), '"')
}

// appendDisplayBody is appendDisplayString without the quotes.
func appendDisplayBody(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainASCII[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			if n := skipSafe(s, i); n != 0 {
				i += n
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1: // not in parsed text; as range would
				b = utf8.AppendRune(append(b, s[start:i]...), r)
			case flagged(r):
				b = append(b, s[start:i]...)
				if r > 0xFFFF {
					hi, lo := utf16Units(r)
					b = appendU(appendU(b, hi), lo)
				} else {
					b = appendU(b, r)
				}
			default:
				i += size
				continue
			}
			i += size
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		default: // the other controls and DEL
			b = appendU(b, rune(c))
		}
		i++
		start = i
	}
	return append(b, s[start:]...)
}

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', upperHex[r>>12&0xF], upperHex[r>>8&0xF], upperHex[r>>4&0xF], upperHex[r&0xF])
}

// flagged reports whether r is shown escaped and warned about: controls,
// format characters, line/paragraph separators and blank letters.
func flagged(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7F && r <= 0x9F:
		return true
	case r < 0xAD:
		return false
	case r == 0x2028, r == 0x2029:
		return true
	case r == 0x034F, r == 0x115F, r == 0x1160, r == 0x17B4, r == 0x17B5, r == 0x3164, r == 0xFFA0:
		return true
	case r > 0xAD && r < 0x600, r > 0x206F && r < 0xFEFF: // no format character (Cf) in these
		return false
	}
	return unicode.Is(unicode.Cf, r)
}

// runeName names a flagged rune for warnings: the Unicode name (or the
// control's usual alias) for the characters people meet, a category
// otherwise.
func runeName(r rune) string {
	if r < 0x20 {
		return c0Names[r]
	}
	if n, ok := invisibleNames[r]; ok {
		return n
	}
	switch {
	case r >= 0x80 && r <= 0x9F:
		return "C1 CONTROL"
	case r >= 0xE0020 && r <= 0xE007F:
		return "TAG CHARACTER"
	}
	return "FORMAT CHARACTER"
}

var c0Names = [0x20]string{
	"NULL", "START OF HEADING", "START OF TEXT", "END OF TEXT",
	"END OF TRANSMISSION", "ENQUIRY", "ACKNOWLEDGE", "BELL",
	"BACKSPACE", "CHARACTER TABULATION", "LINE FEED", "LINE TABULATION",
	"FORM FEED", "CARRIAGE RETURN", "SHIFT OUT", "SHIFT IN",
	"DATA LINK ESCAPE", "DEVICE CONTROL ONE", "DEVICE CONTROL TWO", "DEVICE CONTROL THREE",
	"DEVICE CONTROL FOUR", "NEGATIVE ACKNOWLEDGE", "SYNCHRONOUS IDLE", "END OF TRANSMISSION BLOCK",
	"CANCEL", "END OF MEDIUM", "SUBSTITUTE", "ESCAPE",
	"INFORMATION SEPARATOR FOUR", "INFORMATION SEPARATOR THREE", "INFORMATION SEPARATOR TWO", "INFORMATION SEPARATOR ONE",
}

var invisibleNames = map[rune]string{
	0x007F: "DELETE",
	0x0085: "NEXT LINE",
	0x00AD: "SOFT HYPHEN",
	0x034F: "COMBINING GRAPHEME JOINER",
	0x061C: "ARABIC LETTER MARK",
	0x115F: "HANGUL CHOSEONG FILLER",
	0x1160: "HANGUL JUNGSEONG FILLER",
	0x17B4: "KHMER VOWEL INHERENT AQ",
	0x17B5: "KHMER VOWEL INHERENT AA",
	0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE",
	0x200C: "ZERO WIDTH NON-JOINER",
	0x200D: "ZERO WIDTH JOINER",
	0x200E: "LEFT-TO-RIGHT MARK",
	0x200F: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR",
	0x2029: "PARAGRAPH SEPARATOR",
	0x202A: "LEFT-TO-RIGHT EMBEDDING",
	0x202B: "RIGHT-TO-LEFT EMBEDDING",
	0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE",
	0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER",
	0x2061: "FUNCTION APPLICATION",
	0x2062: "INVISIBLE TIMES",
	0x2063: "INVISIBLE SEPARATOR",
	0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE",
	0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE",
	0x3164: "HANGUL FILLER",
	0xFEFF: "ZERO WIDTH NO-BREAK SPACE",
	0xFFA0: "HALFWIDTH HANGUL FILLER",
	0xFFF9: "INTERLINEAR ANNOTATION ANCHOR",
	0xFFFA: "INTERLINEAR ANNOTATION SEPARATOR",
	0xFFFB: "INTERLINEAR ANNOTATION TERMINATOR",
}
