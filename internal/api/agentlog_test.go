package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"toolgate/internal/api"
	"toolgate/internal/approval"
)

// TestAgentListenerRefusalIsNotAnAdminFailure (fixes49): a request the
// agent listener's session API refused (an agent token asking for a child
// session, an unknown token, a path it does not serve) was logged as
// "admin request failed", sending the operator to the admin listener. It
// is logged as the agent listener's refusal, tagged listener=agent, at
// WARN for a token refused and DEBUG otherwise, with no token or body;
// the admin API's own refusals keep their message.
func TestAgentListenerRefusalIsNotAnAdminFailure(t *testing.T) {
	recs := make(chan slog.Record, 16)
	log := slog.New(chanLog{ch: recs})
	agent := api.NewAgentSessions(nil, func(tok string) (approval.Principal, bool) {
		return approval.Principal{ID: "desktop", Kind: "agent"}, tok == "plain-agent-secret"
	}, &api.Options{Logger: log})
	const body = `{"principal":"child","secret_arg":"hunter2"}`
	for _, c := range []struct {
		name, path, token string
		status            int
		level             slog.Level
	}{
		{"agent token, not a session's", "/v1/sessions", "plain-agent-secret", http.StatusForbidden, slog.LevelWarn},
		{"unknown token", "/v1/sessions", "nosuch-token-secret", http.StatusUnauthorized, slog.LevelWarn},
		{"an admin path", "/v1/approvals", "plain-agent-secret", http.StatusNotFound, slog.LevelDebug},
	} {
		t.Run(c.name, func(t *testing.T) {
			if a := send(t, agent, "POST", c.path, c.token, body); a.status != c.status {
				t.Fatalf("POST %s: %d, want %d: %s", c.path, a.status, c.status, a.body)
			}
			r := takeRecord(t, recs)
			attrs := attrsOf(r)
			if r.Message != "agent listener request refused" || r.Level != c.level || attrs["listener"] != "agent" ||
				attrs["path"] != c.path || attrs["status"] != strconv.Itoa(c.status) {
				t.Errorf("logged %s %q %v, want %s %q listener=agent path=%s status=%d", r.Level, r.Message, attrs, c.level, "agent listener request refused", c.path, c.status)
			}
			for k, v := range attrs {
				if strings.Contains(v, "secret") || strings.Contains(v, "hunter2") {
					t.Errorf("the log line carries the token or the body: %s=%q", k, v)
				}
			}
		})
	}
	select {
	case r := <-recs:
		t.Errorf("an extra log line: %q", r.Message)
	default:
	}

	admin := api.New(nil, nil, &api.Options{Logger: log})
	if a := send(t, admin, "GET", "/v1/approvals", "plain-agent-secret", ""); a.status != http.StatusUnauthorized {
		t.Fatalf("admin with an agent token: %d", a.status)
	}
	if r := takeRecord(t, recs); r.Message != "admin request failed" || attrsOf(r)["listener"] != "" {
		t.Errorf("the admin API's refusal logged %q %v", r.Message, attrsOf(r))
	}
}

// chanLog is a slog.Handler that sends each record to ch (buffered: the
// server logs before it answers).
type chanLog struct{ ch chan slog.Record }

func (h chanLog) Enabled(context.Context, slog.Level) bool { return true }
func (h chanLog) Handle(_ context.Context, r slog.Record) error {
	h.ch <- r.Clone()
	return nil
}
func (h chanLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanLog) WithGroup(string) slog.Handler      { return h }

// takeRecord returns the record already logged to ch, failing if none was.
func takeRecord(t *testing.T, ch <-chan slog.Record) slog.Record {
	t.Helper()
	select {
	case r := <-ch:
		return r
	default:
		t.Fatal("nothing was logged")
	}
	return slog.Record{}
}

func attrsOf(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}
