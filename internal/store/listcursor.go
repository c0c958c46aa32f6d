package store

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"toolgate/internal/approval"
)

// A ListPosition is where a page of ListRequests (or ListGrants, the
// same way: read "grant" for "request") ended: the list order of its last
// request, and, for a list read oldest first on a store whose
// order is not commit order, the transactions that may still add
// requests before that place. Filter.Cursor carries it as its String
// (ListCursor), opaque to clients.
//
// Requests are listed by (Order, ID). Order is assigned by the store when
// the request is created: on SQLite a counter (one writer at a time, so
// it follows commit order); on Postgres the id of the creating
// transaction (pg_current_xact_id()), which a transaction takes before it
// commits, so one that commits later can have a smaller Order. Open lists
// those: every transaction below Order that was still running when the
// page was read, so the next page also reads the requests they
// committed meanwhile (sqlstore's listing explains why nothing is
// skipped). Requests stored before list orders existed have Order 0 and
// come first, by id.
type ListPosition struct {
	Order uint64
	ID    approval.ID
	// Open is ascending, each below Order.
	Open []uint64
}

// MaxOpenTransactions bounds ListPosition.Open (and so the length of a
// cursor, about 4 characters an entry): a page whose end had more
// transactions running below it is cut shorter, before the row that
// would carry one too many (sqlstore; the page keeps fewer rows than its
// limit and has a next cursor). Transaction ids are the whole Postgres
// cluster's, so other databases' transactions count too. Only a page
// that cannot keep even its first row fails (an error, never a page that
// could skip), and succeeds when read again once they ended.
const MaxOpenTransactions = 400

// listCursorPrefix marks a cursor as a ListPosition; a cursor without it
// is the id of the last request of a page, as cursors were before list
// orders (hex digits and dashes).
const listCursorPrefix = "p."

// ErrBadCursor is the error of a cursor that no list returned.
var ErrBadCursor = errors.New("store: not a cursor of this list")

// String returns the cursor text of p: "p." and the URL-safe base64 of
// its fields.
func (p ListPosition) String() string {
	b := make([]byte, 0, 16+len(p.ID)+3*len(p.Open))
	b = binary.AppendUvarint(b, p.Order)
	b = binary.AppendUvarint(b, uint64(len(p.ID)))
	b = append(b, p.ID...)
	b = binary.AppendUvarint(b, uint64(len(p.Open)))
	for _, o := range p.Open {
		b = binary.AppendUvarint(b, p.Order-o)
	}
	return listCursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseListCursor reads a Filter.Cursor (or a GrantFilter.Cursor): the
// String of a ListPosition, or the id of the last request (grant) of a
// page as cursors were before list orders (hex digits and dashes, at
// most 36), which is the position of that id among the requests (grants)
// stored before them (Order 0). "" is the zero
// position (the start). Anything else is an error wrapping ErrBadCursor.
func ParseListCursor(s string) (ListPosition, error) {
	rest, ok := strings.CutPrefix(s, listCursorPrefix)
	if !ok {
		if len(s) > 36 || strings.Trim(s, "0123456789abcdef-") != "" {
			return ListPosition{}, fmt.Errorf("%w: %.40q", ErrBadCursor, s)
		}
		return ListPosition{ID: approval.ID(s)}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return ListPosition{}, fmt.Errorf("%w: %.40q", ErrBadCursor, s)
	}
	var p ListPosition
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	order, ok1 := next()
	idLen, ok2 := next()
	if !ok1 || !ok2 || idLen == 0 || idLen > uint64(len(b)) {
		return ListPosition{}, fmt.Errorf("%w: %.40q", ErrBadCursor, s)
	}
	p.Order, p.ID, b = order, approval.ID(b[:idLen]), b[idLen:]
	n, ok := next()
	if !ok || n > MaxOpenTransactions {
		return ListPosition{}, fmt.Errorf("%w: %.40q", ErrBadCursor, s)
	}
	for range n {
		d, ok := next()
		if !ok || d == 0 || d > p.Order {
			return ListPosition{}, fmt.Errorf("%w: %.40q", ErrBadCursor, s)
		}
		p.Open = append(p.Open, p.Order-d)
	}
	if len(b) > 0 || !slices.IsSorted(p.Open) || len(slices.Compact(slices.Clone(p.Open))) != len(p.Open) {
		return ListPosition{}, fmt.Errorf("%w: %.40q", ErrBadCursor, s)
	}
	return p, nil
}
