package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"toolgate/internal/store"
)

// On Postgres the audit chain's links go in with COPY … FROM STDIN in the
// text format (pgCopyAudit), not as the parameters of an INSERT. Through
// pgx an INSERT's parameters are copied three times, each into a buffer
// grown from small (pgx keeps at most 256 bytes of parameters and 1 KB of
// message between statements): the record's string(…), its text encoding
// and the Bind message; at 128 links that was ≈ 9 KB allocated per
// approval in approve-all for ≈ 2 KB of links (docs/performance.md,
// "Bytes per approval on Postgres: the audit links by COPY"). COPY reads the rows
// from an io.Reader into one pooled 64 KB buffer of pgconn's. The values
// stored are the same bytes: COPY's text format is exact for every text
// once backslash, newline, carriage return and tab are escaped (what
// auditCopy does; TestAuditCopyStoresWhatInsertStores), and it is read in
// the connection's client encoding as a parameter is.

// pgCopyAuditSQL is the COPY of pgCopyAudit; its columns are the order of
// auditCopy's fields.
const pgCopyAuditSQL = `COPY audit_log (seq, at, tenant, record, prev_hash, hash) FROM STDIN`

// pgCopyAudit inserts links into audit_log with one COPY on conn, inside
// the transaction pgTxOnce began on it. It fails, and the transaction with
// it, when the server stores another number of rows than len(links).
func pgCopyAudit(ctx context.Context, conn *sql.Conn, links []store.AuditEntry) error {
	var tag pgconn.CommandTag
	err := pgRaw(conn, func(pc *pgconn.PgConn) error {
		var err error
		tag, err = pc.CopyFrom(ctx, &auditCopy{links: links}, pgCopyAuditSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if n := tag.RowsAffected(); n != int64(len(links)) {
		return fmt.Errorf("copy stored %d rows of %d", n, len(links))
	}
	return nil
}

// auditCopy is an io.Reader of links as COPY's text format: one line per
// link, its fields seq, at (unix milliseconds), tenant, record, prev_hash
// and hash separated by tabs. It encodes one line at a time into row,
// which it reuses, so reading allocates the longest line once. pgconn
// reads it on a goroutine of CopyFrom's, which returns after the last Read.
type auditCopy struct {
	links []store.AuditEntry
	row   []byte
	left  []byte // of row, not read yet
}

func (c *auditCopy) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(c.left) == 0 {
			if len(c.links) == 0 {
				break
			}
			c.row = appendAuditLine(c.row[:0], &c.links[0])
			c.left, c.links = c.row, c.links[1:]
		}
		k := copy(p[n:], c.left)
		c.left = c.left[k:]
		n += k
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// appendAuditLine appends l's line of COPY's text format to b.
func appendAuditLine(b []byte, l *store.AuditEntry) []byte {
	b = strconv.AppendInt(b, l.Seq, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, millis(l.At), 10)
	b = append(b, '\t')
	b = appendCopyText(b, l.Tenant)
	b = append(b, '\t')
	b = appendCopyText(b, l.Record)
	b = append(b, '\t')
	b = appendCopyText(b, l.PrevHash)
	b = append(b, '\t')
	b = appendCopyText(b, l.Hash)
	return append(b, '\n')
}

// appendCopyText appends s to b as a field of COPY's text format: a
// backslash, newline, carriage return or tab escaped with a backslash
// (PostgreSQL, COPY, "Text Format"), every other byte as it is. No field
// is NULL, so \N never needs to be written; an escaped backslash can never
// begin the end marker \. either.
func appendCopyText[S ~string | ~[]byte](b []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		var e byte
		switch s[i] {
		case '\\':
			e = '\\'
		case '\n':
			e = 'n'
		case '\r':
			e = 'r'
		case '\t':
			e = 't'
		default:
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, '\\', e)
		start = i + 1
	}
	return append(b, s[start:]...)
}
