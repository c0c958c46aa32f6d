package sqlstore

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// auditTestLinks returns n links after head whose tenants, records and
// hashes are random texts over an alphabet of what COPY's text format
// escapes or treats specially (tab, newline, carriage return, backslash,
// '.', 'N'), multi-byte UTF-8 and plain ASCII, after a fixed set of edge
// cases when edges: empty fields, \. and \N, a line of only escapes, and a
// record longer than pgconn's 64 KB COPY buffer.
func auditTestLinks(head store.AuditHead, n int, rng *rand.Rand, edges bool) []store.AuditEntry {
	alphabet := []rune{'\t', '\n', '\r', '\\', '.', 'N', ' ', '"', '{', '}', 'a', 'z', '0', 'é', '€', '𝄞', '\u0301', '\u2028', '\u00a0', '\x7f', '\x01'}
	text := func(max int) string {
		var b strings.Builder
		for range rng.IntN(max + 1) {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	fixed := []string{"", `\.`, `\N`, "\\.\n", "\t\t\n\r\\\\", `{"a":"b\"c\\d"}`, strings.Repeat("x\ty\\z\n", 30000)}
	var out []store.AuditEntry
	prev, seq := head.Hash, head.Seq
	for i := range n {
		seq++
		rec, tenant := text(300), text(8)
		if edges && i < len(fixed) {
			rec, tenant = fixed[i], fixed[len(fixed)-1-i%len(fixed)][:min(len(fixed[len(fixed)-1-i%len(fixed)]), 12)]
		}
		e := store.AuditEntry{
			Seq: seq, At: t0.Add(time.Duration(i) * time.Millisecond), Tenant: tenant,
			Record: []byte(rec), PrevHash: prev, Hash: fmt.Sprintf("h%d%s", seq, text(3)),
		}
		if i == 0 {
			e.At = time.Time{} // stored 0
		}
		out = append(out, e)
		prev = e.Hash
	}
	return out
}

// auditRows reads every audit_log row of db in seq order, each field as
// the bytes Postgres holds (the record also as its octet length and md5,
// computed by the server).
func auditRows(t *testing.T, db *DB) []string {
	t.Helper()
	rows, err := db.sql.QueryContext(t.Context(), `SELECT seq, at, tenant, record, prev_hash, hash, octet_length(record), md5(record) FROM audit_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var (
			seq, at, n           int64
			tenant, rec, p, h, m string
		)
		if err := rows.Scan(&seq, &at, &tenant, &rec, &p, &h, &n, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d|%d|%q|%q|%q|%q|%d|%s", seq, at, tenant, rec, p, h, n, m))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAuditCopyStoresWhatInsertStores: the links appendAudit writes with
// COPY on Postgres are stored byte for byte as the INSERT of before
// (insertAudit, still SQLite's) stores them, and as they were given, over
// 2,000 random links and the edge cases of auditTestLinks in batches of
// 1 to 700; a record Postgres refuses as text (a NUL byte, invalid UTF-8)
// fails the write on both paths, and nothing of its batch is stored.
func TestAuditCopyStoresWhatInsertStores(t *testing.T) {
	byCopy := openTest(t, postgresConfig(pgtest.Fresh(t)))
	byInsert := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(42, 13))
	var (
		head store.AuditHead
		want []string
	)
	for _, n := range []int{7, 1, 700, 128, 129, 2, 1000, 33} {
		links := auditTestLinks(head, n, rng, true)
		if err := byCopy.inTx(ctx, func(t *tx) error { return t.appendAudit(ctx, head, links) }); err != nil {
			t.Fatalf("append %d links by COPY: %v", n, err)
		}
		if err := byInsert.inTx(ctx, func(t *tx) error { return t.insertAudit(ctx, links) }); err != nil {
			t.Fatalf("insert %d links: %v", n, err)
		}
		for _, l := range links {
			want = append(want, fmt.Sprintf("%d|%d|%q|%q|%q|%q|%d|", l.Seq, millis(l.At), l.Tenant, l.Record, l.PrevHash, l.Hash, len(l.Record)))
		}
		last := links[len(links)-1]
		head = store.AuditHead{Seq: last.Seq, Hash: last.Hash}
	}
	got, old := auditRows(t, byCopy), auditRows(t, byInsert)
	if len(got) != len(want) || len(old) != len(want) {
		t.Fatalf("COPY stored %d rows, INSERT %d; want %d", len(got), len(old), len(want))
	}
	for i := range want {
		if got[i] != old[i] {
			t.Fatalf("row %d: COPY stored\n%.300s\nINSERT stored\n%.300s", i, got[i], old[i])
		}
		if !strings.HasPrefix(got[i], want[i]) {
			t.Fatalf("row %d: stored\n%.300s\nwant\n%.300s", i, got[i], want[i])
		}
	}
	if h, err := byCopy.AuditChain(ctx); err != nil || h.Seq != head.Seq || h.Hash != head.Hash {
		t.Fatalf("head after COPY = %+v, %v; want seq %d hash %q", h, err, head.Seq, head.Hash)
	}

	for _, bad := range []string{"a\x00b", "a\xffb"} {
		links := auditTestLinks(head, 3, rng, true)
		links[1].Record = []byte(bad)
		errCopy := byCopy.inTx(ctx, func(t *tx) error { return t.appendAudit(ctx, head, links) })
		errInsert := byInsert.inTx(ctx, func(t *tx) error { return t.insertAudit(ctx, links) })
		if errCopy == nil || errInsert == nil {
			t.Fatalf("record %q: COPY %v, INSERT %v; want both to fail", bad, errCopy, errInsert)
		}
	}
	if got, old := auditRows(t, byCopy), auditRows(t, byInsert); len(got) != len(want) || len(old) != len(want) {
		t.Fatalf("after the refused records: COPY %d rows, INSERT %d; want %d", len(got), len(old), len(want))
	}
}

// TestAuditAppendAllocatesPerStatement: appending links to the chain on
// Postgres allocates about as much for 512 links as for 16 (COPY reads
// them into pgconn's pooled buffer; the line buffer is reused). The
// INSERT's parameters allocated at least five times per link (each value
// boxed, the record copied to a string). Compared with a margin of one
// allocation per link, far above the noise of a few.
func TestAuditAppendAllocatesPerStatement(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 7))
	var head store.AuditHead
	appendN := func(n int) float64 {
		const runs = 5
		batches := make([][]store.AuditEntry, 0, runs+1)
		for range runs + 1 { // AllocsPerRun runs once more to warm up
			links := auditTestLinks(head, n, rng, false)
			batches = append(batches, links)
			last := links[len(links)-1]
			head = store.AuditHead{Seq: last.Seq, Hash: last.Hash}
		}
		i := 0
		return testing.AllocsPerRun(runs, func() {
			links := batches[i]
			i++
			h := store.AuditHead{Seq: links[0].Seq - 1, Hash: links[0].PrevHash}
			if err := db.inTx(ctx, func(t *tx) error { return t.appendAudit(ctx, h, links) }); err != nil {
				panic(err)
			}
		})
	}
	few, many := appendN(16), appendN(512)
	if many-few > 512-16 {
		t.Fatalf("appending 512 links allocated %.0f times, 16 links %.0f: more than one allocation per link", many, few)
	}
	t.Logf("allocations: 16 links %.0f, 512 links %.0f", few, many)
}
