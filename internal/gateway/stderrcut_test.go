package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// lineHandler is a slog.Handler that hands each record's "line" attribute
// to a channel, so a test reads what stderrLog logged as it is logged.
type lineHandler struct{ lines chan string }

func (h lineHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h lineHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h lineHandler) WithGroup(string) slog.Handler            { return h }
func (h lineHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			h.lines <- a.Value.String()
		}
		return true
	})
	return nil
}

// TestStderrLogHidesValueAtCut: a stderr line longer than maxStderrLine
// keeps only its first maxStderrLine bytes, and a value of the child's
// environment that straddles that cut is not whole in what is kept: the
// logged line must not end with its first bytes (on a33a630b it showed
// them, as redaction looks only for whole values). The other cut points
// check that a value cut after one byte or one byte short of its end is
// hidden too, and a value wholly inside the kept part is still redacted.
func TestStderrLogHidesValueAtCut(t *testing.T) {
	const secret = "s3cr3t-Value-0123456789abcdef"
	for _, k := range []int{1, 7, 8, 15, len(secret) - 1, len(secret)} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			h := lineHandler{lines: make(chan string, 4)}
			s := newStderrLog("up", map[string]string{"API_TOKEN": secret}, slog.New(h))
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); s.run(ctx) }()
			defer func() { cancel(); <-done }()

			fmt.Fprintf(s, "%s%s and more\n", strings.Repeat(".", maxStderrLine-k), secret)
			got := <-h.lines
			if strings.HasSuffix(got, secret[:k]) || strings.Contains(got, secret[:min(k, 4)]) {
				t.Errorf("cut %d bytes into the value: the logged line ends %q, which shows its start %q", k, got[max(0, len(got)-40):], secret[:k])
			}
			if len(got) > maxStderrLine {
				t.Errorf("the logged line is %d bytes, want at most %d", len(got), maxStderrLine)
			}
		})
	}
}
