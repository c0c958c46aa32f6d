package api

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"
)

// UpstreamState is one upstream server's state as /readyz reports it.
type UpstreamState struct {
	// State is connecting, connected, unreachable (a session is open but
	// its health check failed) or reconnecting (no session).
	State string `json:"state"`
	// Required says whether the server being down makes /readyz 503
	// (servers.<name>.required, default true).
	Required bool `json:"required"`
	// Since is when State began (RFC 3339, UTC).
	Since time.Time `json:"since"`
	// LastError says why it is not connected.
	LastError string `json:"last_error,omitempty"`
}

// StateConnected is the UpstreamState.State of a healthy upstream.
const StateConnected = "connected"

// ReadyReport is the body of GET /readyz: Status "ok" (200) or
// "unavailable" (503, with Error saying why: the store does not answer, or
// a required upstream is not connected), and every upstream's state.
type ReadyReport struct {
	Status    string                   `json:"status"`
	Error     *ErrorDetail             `json:"error,omitempty"`
	Upstreams map[string]UpstreamState `json:"upstreams,omitempty"`
}

// readyz answers GET /readyz. A failure is not logged here: it would be
// logged on every probe; the store's callers and the gateway's state
// changes log it.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	rep := ReadyReport{Status: "ok"}
	var errs []error
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			errs = append(errs, err)
		}
	}
	if s.upstreams != nil {
		rep.Upstreams = s.upstreams()
		for _, name := range slices.Sorted(maps.Keys(rep.Upstreams)) {
			if u := rep.Upstreams[name]; u.Required && u.State != StateConnected {
				errs = append(errs, fmt.Errorf("upstream %q is %s since %s: %s", name, u.State, u.Since.UTC().Format(time.RFC3339), u.LastError))
			}
		}
	}
	status := http.StatusOK
	if err := errors.Join(errs...); err != nil {
		status = http.StatusServiceUnavailable
		rep.Status = "unavailable"
		rep.Error = &ErrorDetail{Code: CodeUnavailable, Message: "not ready: " + err.Error()}
		s.log.DebugContext(r.Context(), "not ready", slog.String(keyErr, err.Error()))
	}
	s.writeJSON(w, r, status, rep)
	return nil
}
