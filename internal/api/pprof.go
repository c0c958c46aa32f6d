package api

import (
	"net/http"
	"net/http/pprof"
)

// routeProfiling mounts Go's runtime profiles (net/http/pprof) under
// /debug/pprof/ for the admin role only: GET /debug/pprof/ lists them,
// /debug/pprof/{heap,allocs,goroutine,block,mutex,threadcreate} serve one
// (?debug=1 as text), /debug/pprof/profile?seconds=N a CPU profile,
// /debug/pprof/trace?seconds=N an execution trace, plus cmdline and symbol.
// Profiles show code paths and memory, never tool arguments or tokens, but
// a goroutine dump can show the gateway's internal state, hence admin only.
func (s *Server) routeProfiling() {
	admin := []string{RoleAdmin}
	serve := func(h http.HandlerFunc) http.Handler {
		return s.handle(s.require(admin, func(w http.ResponseWriter, r *http.Request, _ caller) error {
			h(w, r)
			return nil
		}))
	}
	s.mux.Handle("GET /debug/pprof/", serve(pprof.Index)) // and the named profiles
	s.mux.Handle("GET /debug/pprof/cmdline", serve(pprof.Cmdline))
	s.mux.Handle("GET /debug/pprof/profile", serve(pprof.Profile))
	s.mux.Handle("GET /debug/pprof/symbol", serve(pprof.Symbol))
	s.mux.Handle("POST /debug/pprof/symbol", serve(pprof.Symbol))
	s.mux.Handle("GET /debug/pprof/trace", serve(pprof.Trace))
}
