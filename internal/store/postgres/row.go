package postgres

import (
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlrow"
)

// The requests row codec is shared with the other SQL backend (sqlrow).
type row = sqlrow.Request

const (
	columns    = sqlrow.RequestColumns
	numColumns = sqlrow.NumRequestColumns
)

func toRow(r approval.Request) (row, error) { return sqlrow.EncodeRequest(r) }

func nullMillis(t time.Time) pgtype.Int8 {
	if t.IsZero() {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: t.UnixMilli(), Valid: true}
}

func fromNullMillis(n pgtype.Int8) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMilli(n.Int64).UTC()
}

// params returns "$from, $from+1, …" with n parameters.
func params(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$")
		b.WriteString(strconv.Itoa(from + i))
	}
	return b.String()
}
