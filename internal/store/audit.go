package store

import (
	"time"

	"toolgate/internal/approval"
)

// The audit trail (issue 14, package audit; docs/audit.md) is a hash chain
// kept in its own table, appended to by one transaction at a time.

// AuditSource is one event of the event log, handed to the chain's builder
// with what it needs to describe the event: the request, session or grant
// it names, as stored when the chain reaches it.
type AuditSource struct {
	Event approval.Event
	// PolicyRevision is set for a policy_changed event (Event then names
	// no request, session or grant).
	PolicyRevision int64
	// Request is the request the event names; nil for session and policy
	// events, or when the request row is gone. A store may fill only the
	// fields an audit record uses (audit's fromEvent: ID, RequestedBy,
	// OnBehalfOf, Tenant, Kind, Server, Tool, Rule, ArgumentsHash, Reviews,
	// Reason, DispatchOutcome, and for a requested event Arguments and
	// DisplayWarnings) and leave the others zero (sqlstore does).
	Request *approval.Request
	// Tenant is the tenant of the session a session event names, or of the
	// grant a grant event names ("" when that row is gone).
	Tenant string
}

// AuditEntry is one link of the audit chain: Record is the canonical JSON
// of the audit event (it carries Seq too), PrevHash the Hash of the link
// before ("" for the first link ever), and Hash = "sha256:" + lowercase hex
// SHA-256 of PrevHash's bytes followed by Record's. At and Tenant repeat
// the record's time and tenant for filtering.
type AuditEntry struct {
	Seq      int64
	At       time.Time
	Tenant   string
	Record   []byte
	PrevHash string
	Hash     string
}

// AuditHead is where the chain stands: its last link (Seq 0 and Hash ""
// when it is empty) and its anchor: the last link removed by pruning (AnchorSeq 0
// and AnchorHash "" when nothing was pruned). A verifier starts after the
// anchor with AnchorHash as the previous hash.
type AuditHead struct {
	Seq        int64
	Hash       string
	AnchorSeq  int64
	AnchorHash string
	AnchorAt   time.Time
}

// AuditFilter selects links for reading. Zero fields do not filter.
type AuditFilter struct {
	// AfterSeq: links with Seq > AfterSeq.
	AfterSeq int64
	// Since: links whose At is not before it.
	Since time.Time
	// Tenant: links of this tenant only (a tenant's reviewer); "" all.
	Tenant string
	// Limit caps the page; 0 means 100.
	Limit int
}
