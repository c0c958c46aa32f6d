package sqlite

import (
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
