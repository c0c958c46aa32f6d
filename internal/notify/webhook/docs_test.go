package webhook

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// snippet returns the fenced code block of lang that follows the line
// starting with after in docs/notifications.md.
func snippet(t *testing.T, after, lang string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "notifications.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, after)
	if i < 0 {
		t.Fatalf("docs/notifications.md has no %q", after)
	}
	rest := doc[i:]
	start := strings.Index(rest, "```"+lang+"\n")
	if start < 0 {
		t.Fatalf("no %s block after %q", lang, after)
	}
	rest = rest[start+len("```"+lang+"\n"):]
	end := strings.Index(rest, "```")
	if end < 0 {
		t.Fatalf("unterminated %s block", lang)
	}
	return rest[:end]
}

// docCase is one signed request and what a documented verifier must say.
type docCase struct {
	header, body string
	ok           bool
}

// docCases signs three requests: valid, tampered, too old.
func docCases() (secret string, now time.Time, cases []docCase) {
	secret, now = "whsec_docs", time.Unix(1772366400, 0) //nolint:gosec // G101: a test key
	body := `{"id":"e1","type":"requested"}`
	good := Sign([]byte(secret), now.Add(-time.Minute), []byte(body))
	stale := Sign([]byte(secret), now.Add(-6*time.Minute), []byte(body))
	return secret, now, []docCase{{good, body, true}, {good, body + " ", false}, {stale, body, false}}
}

// TestDocumentedGoVerifier compiles and runs the Go snippet of
// docs/notifications.md against signatures made by Sign.
func TestDocumentedGoVerifier(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to compile the snippet: %v", err)
	}
	secret, now, cases := docCases()
	var calls strings.Builder
	for _, c := range cases {
		calls.WriteString("\tfmt.Println(verify([]byte(" + quote(secret) + "), " + quote(c.header) + ", []byte(" + quote(c.body) + "), time.Unix(" + itoa(now.Unix()) + ", 0)) == nil)\n")
	}
	src := `package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

` + snippet(t, "several `v1` entries", "go") + `
func main() {
` + calls.String() + `}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), goBin, "run", file) //nolint:gosec // G204: the go command runs the test's own file
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GO111MODULE=off")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run the snippet: %v\n%s\n%s", err, out, src)
	}
	if got, want := strings.Fields(string(out)), []string{"true", "false", "false"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the Go snippet says %v, want %v", got, want)
	}
}

// TestDocumentedPythonVerifier runs the Python snippet the same way, when a
// python3 is on PATH.
func TestDocumentedPythonVerifier(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH to run the documented Python verifier with")
	}
	secret, now, cases := docCases()
	src := snippet(t, "In Python:", "python") + "\n"
	for _, c := range cases {
		src += "print(verify(" + quote(secret) + ".encode(), " + quote(c.header) + ", " + quote(c.body) + ".encode(), " + itoa(now.Unix()) + "))\n"
	}
	cmd := exec.CommandContext(t.Context(), py, "-c", src) //nolint:gosec // G204: python3 runs the documented snippet
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s\n%s", err, out, src)
	}
	if got := strings.Join(strings.Fields(string(out)), " "); got != "True False False" {
		t.Errorf("the Python snippet says %s, want True False False", got)
	}
}

func quote(s string) string { return strconv.Quote(s) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
