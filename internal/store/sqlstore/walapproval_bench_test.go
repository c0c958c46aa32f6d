package sqlstore

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// BenchmarkApprovalWAL: the WAL one approval writes on Postgres. Each op
// is an approval (create, approve, consume, outcome); every 16 ops the
// audit chain appends the links of their events (sha256 links of
// ≈ 450-byte records, as the trail's), and once more at the end.
// cluster-wal-B/approval is the server's WAL position moved per op, other
// databases' writes included (a shared server makes it noisy). With
// TOOLGATE_BENCH_WALDUMP (pg_waldump's path) and TOOLGATE_BENCH_PGWAL
// (the server's pg_wal directory, readable) it also reads the range's
// records and reports this database's WAL per op (wal-B/approval, full
// page images included; commits counted by transaction id) and the share
// of the audit chain's tables (audit-wal-B/approval: audit_log, its
// indexes, audit_chain, feed_cursors). docs/performance.md, plans39.
func BenchmarkApprovalWAL(b *testing.B) {
	db := openTest(b, backends[1].fresh(b)) // Postgres
	ctx := b.Context()
	chain := func() int {
		n := 0
		for {
			k, more, err := db.ChainAudit(ctx, 100, 0, shaLinks)
			if err != nil {
				b.Fatal(err)
			}
			n += k
			if !more {
				return n
			}
		}
	}
	lsn := func() string {
		var s string
		if err := db.sql.QueryRowContext(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
			b.Fatal(err)
		}
		return s
	}
	start, links, i := lsn(), 0, 0
	for b.Loop() {
		id := testID(i + 1)
		if err := db.CreateRequest(ctx, pendingRequest(id)); err != nil {
			b.Fatal(err)
		}
		if _, err := db.UpdateRequest(ctx, id, "alice", approveFn); err != nil {
			b.Fatal(err)
		}
		if _, err := db.UpdateRequest(ctx, id, "toolgate", func(r *approval.Request) error {
			return r.Consume(r.Binding(), "", t0.Add(2*time.Minute))
		}); err != nil {
			b.Fatal(err)
		}
		if err := db.RecordOutcome(ctx, id, approval.OutcomeOK, nil, "toolgate"); err != nil {
			b.Fatal(err)
		}
		if i%16 == 15 {
			links += chain()
		}
		i++
	}
	links += chain()
	end := lsn()
	var moved int64
	if err := db.sql.QueryRowContext(ctx, `SELECT pg_wal_lsn_diff($1, $2)::bigint`, end, start).Scan(&moved); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(moved)/float64(b.N), "cluster-wal-B/approval")
	b.ReportMetric(float64(links)/float64(b.N), "links/approval")
	dump, dir := os.Getenv("TOOLGATE_BENCH_WALDUMP"), os.Getenv("TOOLGATE_BENCH_PGWAL")
	if dump == "" || dir == "" {
		return
	}
	all, audit := walOfDatabase(b, db, dump, dir, start, end)
	b.ReportMetric(float64(all)/float64(b.N), "wal-B/approval")
	b.ReportMetric(float64(audit)/float64(b.N), "audit-wal-B/approval")
}

// shaLinks builds the audit links of src after head: sha256 hashes, as
// audit.Trail's, of records about as long as the trail's.
func shaLinks(head store.AuditHead, src []store.AuditSource) ([]store.AuditEntry, error) {
	links := make([]store.AuditEntry, 0, len(src))
	prev, seq := head.Hash, head.Seq
	for _, s := range src {
		seq++
		rec := fmt.Sprintf(`{"seq":%d,"at":"2026-12-06T13:00:00.000Z","type":"%s","event_seq":%d,"approval_id":"%s",`+
			`"principal":"desktop","on_behalf_of":"","tenant":"acme","kind":"tool_call","server":"pay","tool":"transfer",`+
			`"arguments_hash":"sha256:%s","actor":"alice","rule":"hold-payments","policy":"r17","arguments":{"to":"acct-9","amount":12}}`,
			seq, s.Event.Type, s.Event.Seq, s.Event.RequestID, strings.Repeat("ab", 32))
		sum := sha256.Sum256([]byte(prev + rec))
		h := "sha256:" + hex.EncodeToString(sum[:])
		links = append(links, store.AuditEntry{Seq: seq, At: s.Event.At, Tenant: "acme", Record: []byte(rec), PrevHash: prev, Hash: h})
		prev = h
	}
	return links, nil
}

// walRecord matches a pg_waldump line's total length and transaction id;
// walBlock a block reference's database and relfilenode.
var (
	walRecord = regexp.MustCompile(`len \(rec/tot\):\s*\d+/\s*(\d+), tx:\s*(\d+),`)
	walBlock  = regexp.MustCompile(`rel \d+/(\d+)/(\d+)`)
)

// walOfDatabase reads the WAL records from start to end with pg_waldump
// and returns the bytes of those that touch db's database (by their first
// block of it) or, without blocks, belong to a transaction that did (its
// commit), and the part of them on the audit chain's relations.
func walOfDatabase(b *testing.B, db *DB, dump, dir, start, end string) (all, audit int64) {
	b.Helper()
	ctx := b.Context()
	if _, err := db.sql.ExecContext(ctx, `SELECT pg_switch_wal()`); err != nil { // end's segment complete
		b.Fatal(err)
	}
	var oid string
	if err := db.sql.QueryRowContext(ctx, `SELECT oid::text FROM pg_database WHERE datname = current_database()`).Scan(&oid); err != nil {
		b.Fatal(err)
	}
	auditRels := map[string]bool{}
	rows, err := db.sql.QueryContext(ctx, `SELECT relfilenode::text FROM pg_class WHERE relfilenode <> 0
		AND relname IN ('audit_log', 'audit_log_pkey', 'audit_log_at', 'audit_chain', 'audit_chain_pkey', 'feed_cursors', 'feed_cursors_pkey')`)
	err = eachRow(rows, err, func(rows *sql.Rows) error {
		var fn string
		err := rows.Scan(&fn)
		auditRels[fn] = true
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, dump, "-p", dir, "-s", start, "-e", end).Output() //nolint:gosec // G702: the operator's own pg_waldump and directory (TOOLGATE_BENCH_*), LSNs from the server
	if err != nil {
		b.Fatalf("%s: %v", dump, err)
	}
	txs := map[string]bool{}
	type record struct {
		tx   string
		size int64
	}
	var unblocked []record // no block: a commit, counted when its transaction wrote here
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := walRecord.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		size, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		blocks := walBlock.FindAllStringSubmatch(sc.Text(), -1)
		if len(blocks) == 0 {
			unblocked = append(unblocked, record{m[2], size})
			continue
		}
		for _, bl := range blocks {
			if bl[1] == oid {
				all += size
				if auditRels[bl[2]] {
					audit += size
				}
				if m[2] != "0" {
					txs[m[2]] = true
				}
				break
			}
		}
	}
	for _, u := range unblocked {
		if txs[u.tx] {
			all += u.size
		}
	}
	return all, audit
}
