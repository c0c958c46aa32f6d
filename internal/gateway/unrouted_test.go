package gateway

import (
	"strings"
	"testing"
)

// TestUnroutedRequestRemedy: a server→client request no agent's request
// can be told apart for is refused with a message whose remedy fits the
// server's sessions. A per-agent server (the stdio default) that asks for
// roots on toolgate's own listing session at start, as the everything
// server does, was told to "use servers.ev.sessions: per_agent", which it
// already had (branch newuser47); a shared one is still told so.
func TestUnroutedRequestRemedy(t *testing.T) {
	for _, c := range []struct {
		name      string
		cfg       ServerConfig
		want, not string
	}{
		{"stdio default", ServerConfig{Name: "ev", Command: "x"}, "a session toolgate keeps for itself", "sessions: per_agent"},
		{"explicit per_agent", ServerConfig{Name: "ev", URL: "http://x", Sessions: SessionsPerAgent}, "a session toolgate keeps for itself", "sessions: per_agent"},
		{"shared stdio", ServerConfig{Name: "ev", Command: "x", Sessions: SessionsShared}, "use servers.ev.sessions: per_agent", "keeps for itself"},
		{"http default", ServerConfig{Name: "ev", URL: "http://x"}, "use servers.ev.sessions: per_agent", "keeps for itself"},
	} {
		u := &upstream{name: c.cfg.Name, cfg: c.cfg}
		got := u.unroutedMessage("roots/list")
		if !strings.Contains(got, c.want) || strings.Contains(got, c.not) || !strings.HasPrefix(got, "toolgate cannot tell which agent roots/list is for") {
			t.Errorf("%s: %q, want it to say %q and not %q", c.name, got, c.want, c.not)
		}
	}
}
