package gateway

import (
	"context"
	"log/slog"
	"strings"
)

// sdkLogger is the logger toolgate gives the go-sdk's server. It passes
// every record on unchanged except one kind: the SDK's WARN "calling
// notifications/…: … rejected by transport …", which it logs whenever a
// change notification (tools/list_changed and the like, sent to every
// session by the SDK's notifySessions in mcp/shared.go) finds no stream to
// go out on. A session without a standalone GET stream cannot receive
// them, and that is the agent's choice, not a fault (MCP 2025-11-25,
// transports: the GET stream is optional), so such a record is logged at
// DEBUG instead. Before, every per-agent session's connect logged one
// WARN per session without a GET stream.
//
// The SDK's INFO records of a session's life ("server connecting",
// "server session connected", "session initialized", "server session
// disconnected", …: sdkRoutine) are DEBUG too: they came three or four
// per agent session (per request of a 2026-07-28 agent), two of them
// without a session id. The gateway's own INFO "agent session started"
// (Gateway.initialize) says who connected, tagged.
func sdkLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(sdkLogHandler{l.Handler()})
}

type sdkLogHandler struct{ h slog.Handler }

func (s sdkLogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	// Handle only lowers a record's level (WARN or INFO to DEBUG), so a
	// record the handler below drops at its own level it drops at DEBUG
	// too: no need to build it (the SDK logs INFO on every request of a
	// 2026-07-28 agent). Handle asks again for a lowered one.
	return s.h.Enabled(ctx, level)
}

func (s sdkLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if (r.Level == slog.LevelWarn && undeliveredNotification(r.Message)) || (r.Level == slog.LevelInfo && sdkRoutine(r.Message)) {
		r.Level = slog.LevelDebug
		if !s.h.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
	}
	if !s.h.Enabled(ctx, r.Level) {
		return nil
	}
	return s.h.Handle(ctx, r)
}

func (s sdkLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkLogHandler{s.h.WithAttrs(as)}
}

func (s sdkLogHandler) WithGroup(name string) slog.Handler {
	return sdkLogHandler{s.h.WithGroup(name)}
}

// undeliveredNotification reports whether msg is the SDK's warning that a
// notification found no stream (its jsonrpc2.ErrRejected, "rejected by
// transport").
func undeliveredNotification(msg string) bool {
	return strings.HasPrefix(msg, "calling notifications/") && strings.Contains(msg, "rejected by transport")
}

// sdkRoutine reports whether msg is one of the go-sdk's (v1.8.0,
// mcp/server.go) INFO records of a session's life, which toolgate logs at
// DEBUG.
func sdkRoutine(msg string) bool {
	switch msg {
	case "server run start", "server connecting", "server session connected", "session initialized",
		"server session disconnected", "server session ended":
		return true
	}
	return false
}
