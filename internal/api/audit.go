package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/store"
)

// Audit is what GET /v1/audit reads: the audit chain (package audit; cmd
// passes the audit trail and the store).
type Audit interface {
	// Flush chains what is waiting (queued calls, committed events), so an
	// export includes everything decided before the request.
	Flush(ctx context.Context) error
	// AuditLog returns the links f selects in seq order.
	AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error)
}

// auditRoles may export the audit trail: an auditor reads (viewer), an
// admin does everything; approvers decide requests and see them through
// /v1/approvals.
var auditRoles = []string{RoleViewer, RoleAdmin}

// AuditLine is one line of GET /v1/audit: one link of the chain. Record is
// the link's canonical JSON, byte for byte, so a receiver can recompute
// Hash = "sha256:" + hex SHA-256(PrevHash + Record) (docs/audit.md).
type AuditLine struct {
	Seq      int64           `json:"seq"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
	Record   json.RawMessage `json:"record"`
}

// auditPage is how many links the export reads from the store at a time.
const auditPage = 500

// exportAudit streams the chain as JSON Lines (application/x-ndjson):
// ?since= an RFC 3339 time or a duration back from now ("24h"), ?after= a
// seq to resume after, ?limit= at most this many lines (default all). A
// caller with a tenant gets only its tenant's links (the lines then do not
// link to each other; each still carries its own hashes).
func (s *Server) exportAudit(w http.ResponseWriter, r *http.Request, c caller) error {
	q := r.URL.Query()
	f := store.AuditFilter{Tenant: c.principal.Tenant, Limit: auditPage}
	if v := q.Get("since"); v != "" {
		t, err := ParseSince(v, s.now())
		if err != nil {
			return invalid("since: %v", err)
		}
		f.Since = t
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return invalid("after %q: want a sequence number", v)
		}
		f.AfterSeq = n
	}
	limit := int64(-1)
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return invalid("limit %q: want a positive number", v)
		}
		limit = n
	}
	if err := s.audit.Flush(r.Context()); err != nil {
		// What is chained is still worth reading; the rest follows later.
		s.log.WarnContext(r.Context(), "audit export: chaining what is waiting failed", "err", err)
	}
	links, err := s.audit.AuditLog(r.Context(), f)
	if err != nil {
		return fmt.Errorf("read the audit log: %w", err)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for {
		for _, l := range links {
			if limit == 0 {
				return nil
			}
			if err := enc.Encode(AuditLine{Seq: l.Seq, PrevHash: l.PrevHash, Hash: l.Hash, Record: l.Record}); err != nil {
				return nil // the client went away; the status is sent
			}
			limit--
			f.AfterSeq = l.Seq
		}
		if len(links) < auditPage || limit == 0 {
			return nil
		}
		if links, err = s.audit.AuditLog(r.Context(), f); err != nil {
			s.log.WarnContext(r.Context(), "audit export: reading the log failed mid-stream", "err", err)
			return nil
		}
	}
}

// ParseSince reads a since= value: an RFC 3339 time, or a Go duration
// counted back from now ("24h", "90m").
func ParseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (24h)", v)
	}
	return now.Add(-d), nil
}
