package store

import (
	"fmt"
	"strconv"
	"strings"
)

// A Cursor is a position in the change feed (Store.Feed): the position of
// the last event a reader has seen. The zero Cursor is the start of the
// log. Feed order is (Tx, Seq): Tx orders the writing transactions
// (Postgres: the transaction id, pg_current_xact_id(), of the transaction
// that wrote the event; SQLite, where one transaction writes at a time and
// Seq follows commit order: always 0), and Seq orders the events of one
// transaction. Store a cursor as its String and read it back with
// ParseCursor.
type Cursor struct {
	Tx  uint64
	Seq int64
}

// String returns c as "<tx>.<seq>", the form ParseCursor reads.
func (c Cursor) String() string {
	return strconv.FormatUint(c.Tx, 10) + "." + strconv.FormatInt(c.Seq, 10)
}

// Before reports whether c comes before d in feed order.
func (c Cursor) Before(d Cursor) bool {
	return c.Tx < d.Tx || (c.Tx == d.Tx && c.Seq < d.Seq)
}

// ParseCursor reads the String form of a Cursor; "" is the zero Cursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	txs, seqs, ok := strings.Cut(s, ".")
	tx, err1 := strconv.ParseUint(txs, 10, 64)
	seq, err2 := strconv.ParseInt(seqs, 10, 64)
	if !ok || err1 != nil || err2 != nil || seq < 0 {
		return Cursor{}, fmt.Errorf("store: bad cursor %q: want <tx>.<seq>", s)
	}
	return Cursor{Tx: tx, Seq: seq}, nil
}
