//go:build ignore

// gen.go wrote rows.sql and want.json in this directory. It builds only
// against toolgate at commit 37590d2 (the last commit with the separate
// internal/store/sqlite and internal/store/postgres packages): it was copied,
// without its build line, to cmd/gen5/main.go of a checkout of that commit
// and run as
//
//	go run ./cmd/gen5 -dir DIR
//
// It fills a new SQLite database through that commit's store (fixed ids
// and times, every table and every kind of row), then writes the rows as
// that commit stored them (rows.sql: portable INSERT statements, events
// without seq, in seq order) and what that commit's Store methods
// returned for them (want.json). The sqlstore test loads rows.sql into the
// schema of migrations 1-5 and expects the new store to return want.json.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC)

// Want is want.json.
type Want struct {
	Requests []Request              `json:"requests"`
	Events   []approval.Event       `json:"events"`
	Sessions []session.Session      `json:"sessions"`
	Policies []store.PolicyRevision `json:"policies"`
}

// Request adds ValidFor, which approval.Request leaves out of JSON.
type Request struct {
	approval.Request
	ValidForMS int64 `json:"valid_for_ms"`
}

func id(n int) approval.ID { return approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", n)) }

func main() {
	dir := flag.String("dir", ".", "where to write rows.sql and want.json")
	flag.Parse()
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "gen5")
	check(err)
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "toolgate.db")
	clock := t0
	db, err := sqlite.Open(ctx, path, &sqlite.Options{Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	check(err)
	fill(ctx, db)

	var w Want
	rs, _, err := db.ListRequests(ctx, store.Filter{Limit: 1000})
	check(err)
	for _, r := range rs {
		w.Requests = append(w.Requests, Request{r, r.ValidFor.Milliseconds()})
	}
	w.Events, err = db.Events(ctx, 0, 1000)
	check(err)
	for i, ev := range w.Events {
		if ev.Seq != int64(i+1) {
			log.Fatalf("event %d has seq %d: the dump needs seq 1..n", i, ev.Seq)
		}
	}
	for _, sid := range []session.ID{"s1", "s2", "s3"} {
		s, err := db.GetSession(ctx, sid)
		check(err)
		w.Sessions = append(w.Sessions, s)
	}
	for n := int64(1); ; n++ {
		p, err := db.GetPolicy(ctx, n)
		if err != nil {
			break
		}
		w.Policies = append(w.Policies, p)
	}
	check(db.Close())
	b, err := json.MarshalIndent(w, "", "\t")
	check(err)
	check(os.WriteFile(filepath.Join(*dir, "want.json"), append(b, '\n'), 0o644))
	check(os.WriteFile(filepath.Join(*dir, "rows.sql"), []byte(dump(ctx, path)), 0o644))
}

func fill(ctx context.Context, db *sqlite.DB) {
	req := func(n int) approval.Request {
		return approval.Request{
			ID: id(n), State: approval.StatePending, Server: "pay", Tool: "transfer",
			Arguments:       json.RawMessage(`{"to":"acct-9", "amount":12345678901234567890, "note":"it's \"?\" $1 -- ok"}`),
			ArgumentsHash:   fmt.Sprintf("sha256:%064x", n),
			DisplayWarnings: []string{"note: a value was hidden by redaction"},
			ToolDigest:      "sha256:1a2b", Rule: "payments need two", Mode: "hold",
			RequestedBy: "desktop", OnBehalfOf: "carol", Tenant: "acme",
			CreatedAt: t0.Add(time.Duration(n) * time.Minute), ExpiresAt: t0.Add(time.Duration(n)*time.Minute + 10*time.Minute),
			RequiredApprovals: 1, Approvers: []string{"group:ops", "alice"}, ValidFor: 10 * time.Minute,
		}
	}
	review := func(n int, by string, v approval.Verdict, reason string) {
		_, err := db.UpdateRequest(ctx, id(n), by, func(r *approval.Request) error {
			return r.Review(approval.Reviewer{ID: by, Groups: []string{"ops"}}, v, reason, "", r.CreatedAt.Add(time.Minute+456*time.Microsecond))
		})
		check(err)
	}
	// 1: pending; 2: approved by two; 3: denied and answered; 4: consumed
	// with an outcome; 5: expired; 6: approved, held by an instance.
	for n := 1; n <= 6; n++ {
		r := req(n)
		if n == 2 {
			r.RequiredApprovals = 2
			r.Mode = "retry"
		}
		if n == 1 {
			r.Arguments, r.DisplayWarnings, r.Approvers, r.OnBehalfOf = nil, nil, nil, ""
		}
		check(db.CreateRequest(ctx, r))
	}
	review(2, "alice", approval.VerdictApprove, "fine")
	review(2, "bob", approval.VerdictApprove, "")
	review(3, "alice", approval.VerdictDeny, "not today")
	_, err := db.UpdateRequest(ctx, id(3), "gw-1", func(r *approval.Request) error { return r.Answer(r.CreatedAt.Add(2 * time.Minute)) })
	check(err)
	review(4, "alice", approval.VerdictApprove, "")
	_, err = db.UpdateRequest(ctx, id(4), "gw-1", func(r *approval.Request) error {
		r.Renew("gw-1", r.CreatedAt.Add(6*time.Minute))
		return r.Consume(r.Binding(), "", r.CreatedAt.Add(3*time.Minute))
	})
	check(err)
	_, err = db.UpdateRequest(ctx, id(4), "gw-1", func(r *approval.Request) error {
		return r.RecordOutcome(approval.OutcomeOK)
	})
	check(err)
	_, err = db.UpdateRequest(ctx, id(5), "sweeper", func(r *approval.Request) error {
		return r.Sweep(r.ExpiresAt.Add(time.Second))
	})
	check(err)
	review(6, "alice", approval.VerdictApprove, "")
	_, err = db.UpdateRequest(ctx, id(6), "gw-2", func(r *approval.Request) error {
		r.Renew("gw-2", r.CreatedAt.Add(5*time.Minute))
		return nil
	})
	check(err)

	// Sessions: a root with a child and a grandchild; the root's policy
	// narrowed; the child revoked (with a pending request of its
	// grandchild's principal cancelled).
	root := session.Session{
		ID: "s1", Principal: session.PrincipalID("s1"), OnBehalfOf: "carol", Tenant: "acme",
		TokenHash: fmt.Sprintf("%064x", 1), Mode: session.ModeExplicit, Tools: []string{"fs", "pay__refund"},
		RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}, "pay": {All: true}},
		Revision:        1, CreatedAt: t0.Add(time.Hour), CreatedBy: "host-app",
	}
	check(db.CreateSession(ctx, root, "host-app"))
	child := root
	child.ID, child.ParentID, child.Principal, child.TokenHash = "s2", "s1", session.PrincipalID("s2"), fmt.Sprintf("%064x", 2)
	child.Mode, child.Tools, child.RequireApproval = session.ModeDefault, nil, nil
	child.CreatedAt = t0.Add(61 * time.Minute)
	check(db.CreateSession(ctx, child, root.Principal))
	grand := child
	grand.ID, grand.ParentID, grand.Principal, grand.TokenHash = "s3", "s2", session.PrincipalID("s3"), fmt.Sprintf("%064x", 3)
	grand.Mode = session.ModeInherited
	grand.CreatedAt = t0.Add(62 * time.Minute)
	check(db.CreateSession(ctx, grand, child.Principal))
	_, _, err = db.UpdateSession(ctx, "s1", "host-app", t0.Add(63*time.Minute), func(s *session.Session) error {
		s.Tools = []string{"fs"}
		return nil
	})
	check(err)
	r7 := req(7)
	r7.RequestedBy, r7.OnBehalfOf = grand.Principal, "carol"
	check(db.CreateRequest(ctx, r7))
	_, err = db.RevokeSession(ctx, "s2", "host-app", t0.Add(64*time.Minute))
	check(err)

	// Deployment policy: revision 1 appended at once, revision 2 through an
	// approved policy_change approval (8); 9 is a session policy request.
	rev := func(text string, at time.Time) store.PolicyRevision {
		return store.PolicyRevision{Policy: text, Digest: fmt.Sprintf("sha256:%064x", len(text)), CreatedAt: at, CreatedBy: "ops-admin", Diff: []string{"default: approve → deny"}}
	}
	_, err = db.AppendPolicy(ctx, 0, rev("default: approve\n", t0.Add(2*time.Hour)), "ops-admin")
	check(err)
	p2 := rev("default: deny\nrules: []\n", t0.Add(10*time.Minute))
	r8 := req(8)
	r8.Kind, r8.Server, r8.Tool, r8.BaseRevision, r8.ArgumentsHash, r8.RequestedBy, r8.Mode = approval.KindPolicyChange, "", "", 1, p2.Digest, "ops-admin", "retry"
	check(db.CreateRequest(ctx, r8))
	review(8, "root-admin", approval.VerdictApprove, "ok")
	_, _, err = db.ApplyPolicyApproval(ctx, id(8), p2, "root-admin", t0.Add(10*time.Minute))
	check(err)
	r9 := req(9)
	r9.Kind, r9.Target, r9.Server, r9.Tool, r9.BaseRevision, r9.RequestedBy, r9.Mode = approval.KindSessionPolicy, "s1", "", "", 2, root.Principal, "retry"
	check(db.CreateRequest(ctx, r9))
}

// dump returns INSERT statements for every row of the store's tables, in a
// form both SQLite and Postgres run: events without seq, in seq order, so
// that a fresh database numbers them the same.
func dump(ctx context.Context, path string) string {
	raw, err := sql.Open("sqlite", path)
	check(err)
	defer raw.Close()
	var b strings.Builder
	b.WriteString("-- Rows written by toolgate's store at commit 37590d2 (schema version 5); see gen.go.\n")
	for _, t := range []struct {
		table, order string
		skip         map[string]bool
	}{
		{"requests", "id", nil},
		{"sessions", "created_at, id", nil},
		{"policy_revisions", "revision", nil},
		{"events", "seq", map[string]bool{"seq": true}},
	} {
		rows, err := raw.QueryContext(ctx, `SELECT * FROM `+t.table+` ORDER BY `+t.order)
		check(err)
		cols, err := rows.Columns()
		check(err)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			check(rows.Scan(ptrs...))
			var names, lits []string
			for i, c := range cols {
				if t.skip[c] {
					continue
				}
				names = append(names, c)
				lits = append(lits, literal(vals[i]))
			}
			fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES (%s);\n", t.table, strings.Join(names, ", "), strings.Join(lits, ", "))
		}
		check(rows.Err())
	}
	return b.String()
}

func literal(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return fmt.Sprint(v)
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case []byte:
		return "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
	}
	log.Fatalf("unexpected value %T", v)
	return ""
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
