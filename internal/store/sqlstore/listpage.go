package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// The approvals list (ListRequests, EachRequest) pages by list order:
// (list_order, id), a place the store gives each request when it is
// created (migration 24; store.ListPosition). Paging by id skipped
// requests: an id is a UUIDv7 from the creating instance's clock, so a
// request of an instance whose clock lags, or one created meanwhile on
// Postgres whose transaction commits after a later id was listed, lands
// before a cursor already handed out (branch page41). The grants list
// (ListGrants) pages the same way, by the same code (a lister), for the
// same reason: an admin paging through grants to revoke them missed one
// made on a lagging instance or committed late (migration 25, branch
// grants42). What follows says "request"; it holds for a grant alike.
//
// Why the order cannot skip, read oldest first (the default of the API):
//
//   - SQLite: list_order is a counter taken inside the creating
//     transaction, and one transaction writes at a time, so a request
//     placed before one already listed committed before it, and was
//     visible to the read that listed that one.
//   - Postgres: list_order is the creating transaction's id. A page is
//     read by one statement, which also selects its snapshot
//     (pg_current_snapshot()). A request placed before the page's last
//     one, L, and not visible to that statement belongs to a transaction
//     with an id below L's that was still running then (every id below
//     the snapshot's xmax is visible unless it is in the snapshot's list
//     of running transactions, and L is visible, so its id is below
//     xmax): the cursor carries those ids (ListPosition.Open), and the
//     next page reads their requests besides the ones after L. Ids of
//     Open are dropped once a later read sees them ended; their requests,
//     then visible, come first on that page. A transaction that creates
//     two requests may show the first of them twice if a page ends
//     between them, never skip one (CreateRequest creates one a
//     transaction, UpdateRequestGranting one grant).
//
// Read newest first (the inbox, the CLI) a list starts at the newest
// request, so one created while it pages is shown by the next read from
// the top; each request created before the first page was read is shown
// once, since its place does not move.

// ListRequests returns one page of requests matching f in list order
// (store.ListPosition: creation order, oldest first; newest first when
// f.Descending), and the cursor of the next page ("" when this page is
// the last): a read oldest first that follows the cursors to "" lists
// every matching request created before it read its last page. It lists
// for people and their tools (the admin API, the inbox): it reads on the
// pool reserved for them (AdminConns), never waiting behind the calls'
// reads and writes in the other pools. A cursor that no list returned is
// an error wrapping store.ErrBadCursor.
func (db *DB) ListRequests(ctx context.Context, f store.Filter) ([]approval.Request, string, error) {
	var rs []approval.Request
	next, err := db.EachRequest(ctx, f, func(r approval.Request) error {
		rs = append(rs, r)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return rs, next, nil
}

// EachRequest is ListRequests that hands the page's requests to fn one at
// a time, in order, instead of collecting the page: it reads the page in
// batches of at most eachBatchRows rows (and about eachBatchBytes of
// arguments), one statement each, resumed at the batch's position as a
// next page would be, and hands a batch to fn once its read has ended.
// What it keeps is one batch, whatever the page's size, and no connection
// of the admin pool is held while fn runs (attack28: GET /v1/approvals
// writes to its client from fn, and a client that stopped reading held
// the read, and with two of them the pool, for the list's 30 s write
// deadline). A page read in batches is not one snapshot: a row written
// meanwhile may show as of its batch's read, as across pages. An error of
// fn ends the page and is returned as is; the store's errors are wrapped
// as ListRequests wraps them. next is ListRequests' cursor, known only
// once the page was read: it is "" whenever err is not nil.
func (db *DB) EachRequest(ctx context.Context, f store.Filter, fn func(approval.Request) error) (next string, err error) {
	l := db.requestLister(f)
	return l.each(ctx, f.Cursor, f.Limit, fn)
}

// requestLister is the lister of the approvals list for f.
func (db *DB) requestLister(f store.Filter) *lister[approval.Request] {
	return &lister[approval.Request]{db: db, reads: db.adminReads(), what: "list requests", src: requestList(f), row: new(requestRow),
		key: func(r *approval.Request) (approval.ID, int) { return r.ID, len(r.Arguments) }}
}

// A lister reads one list paged by list order (the approvals list, the
// grants list) in batches, its rows decoded into T.
type lister[T any] struct {
	db    *DB
	reads querier // the pool it reads on
	what  string  // the errors' prefix: "list requests"
	src   listSource
	row   listRow[T] // scanned into, row after row
	// key returns a row's id and the bytes it counts towards
	// eachBatchBytes.
	key func(*T) (approval.ID, int)
	// maxOpen bounds the transactions a cursor carries (0:
	// store.MaxOpenTransactions; tests lower it).
	maxOpen int
}

// A listRow is the row type of a listSource's columns.
type listRow[T any] interface {
	dest() []any
	decode() (T, error)
}

// each reads the page of at most limit rows (defaultLimit when limit <=
// 0) after cursor (store.ParseListCursor; a bad one is wrapped
// store.ErrBadCursor) and hands its rows to fn as EachRequest does, and
// returns the next page's cursor ("" at the end, and whenever err is not
// nil). On Postgres, read oldest first, a page is cut shorter where a
// longer one would end above more running transactions than a cursor
// holds (store.MaxOpenTransactions); only a page that cannot keep even
// its first row fails (errTooManyOpen).
func (l *lister[T]) each(ctx context.Context, cursor string, limit int, fn func(T) error) (next string, err error) {
	pos, err := store.ParseListCursor(cursor)
	if err != nil {
		return "", fmt.Errorf("%s: %w", l.what, err)
	}
	if limit <= 0 {
		limit = defaultLimit
	}
	var (
		batch []T
		zero  T
	)
	for n := 0; ; {
		var more, cut bool
		batch, pos, more, cut, err = l.batch(ctx, pos, min(limit-n, eachBatchRows), batch[:0])
		if errors.Is(err, errTooManyOpen) && n > 0 {
			return pos.String(), nil // the page ends after the rows handed to fn
		}
		if err != nil {
			return "", err
		}
		if len(batch) == 0 {
			return "", nil
		}
		for i := range batch {
			if err := fn(batch[i]); err != nil {
				return "", err
			}
			batch[i] = zero // not kept past fn
		}
		n += len(batch)
		if !more {
			return "", nil
		}
		if n == limit || cut {
			return pos.String(), nil // a row past the page: there is a next page
		}
	}
}

// eachBatchRows and eachBatchBytes bound one read of a lister: the rows
// it decodes and keeps before fn sees them, and (checked after each row)
// their bytes as its key counts them (a request's arguments).
const (
	eachBatchRows  = 64
	eachBatchBytes = 256 << 10
)

// batch reads the rows after pos (limit at most, fewer once their bytes
// reach eachBatchBytes) into out, with the read ended (its connection
// back in the pool) when it returns, and the position after them (pos
// when out is empty). more reports a row past those returned (or, after a
// batch cut by its bytes, that one may exist). cut reports a batch cut
// shorter because a cursor after a later row would carry more running
// transactions than it may (l.maxOpen): the page ends after it, and the
// next page, read from a later snapshot, finds fewer of them running. When
// not even the first row fits, the error wraps errTooManyOpen.
func (l *lister[T]) batch(ctx context.Context, pos store.ListPosition, limit int, out []T) (_ []T, next store.ListPosition, more, cut bool, err error) {
	_, pg := l.db.d.(*postgresDialect)
	snap := pg && !l.src.desc // the read needs its snapshot (see above)
	q, args := listQuery(l.src, pos, limit, pg)
	rows, err := l.reads.query(ctx, q, args...)
	if err != nil {
		return out, pos, false, false, l.db.wrap(l.what, err)
	}
	defer func() { _ = rows.Close() }() // on early returns; the last Close's error is returned below
	var (
		order     string
		snapshot  string
		dest      = append(l.row.dest(), &order)
		size      int
		places    []store.ListPosition // of out's rows, when snap
		last      store.ListPosition
		peek      uint64
		peeked    bool
		snapTaken string
	)
	if snap {
		dest = append(dest, &snapshot)
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return out, pos, false, false, l.db.wrap(l.what, err)
		}
		o, err := strconv.ParseUint(order, 10, 64)
		if err != nil {
			return out, pos, false, false, fmt.Errorf("%s: list order %q: %w", l.what, order, err)
		}
		snapTaken = snapshot
		if len(out) == limit || size >= eachBatchBytes {
			more, peek, peeked = true, o, true
			break
		}
		r, err := l.row.decode()
		if err != nil {
			return out, pos, false, false, l.db.wrap(l.what, err)
		}
		out = append(out, r)
		id, n := l.key(&out[len(out)-1])
		size += n
		last = store.ListPosition{Order: o, ID: id}
		if snap {
			places = append(places, last)
		}
	}
	if err := rows.Err(); err != nil {
		return out, pos, false, false, l.db.wrap(l.what, err)
	}
	if err := rows.Close(); err != nil {
		return out, pos, false, false, l.db.wrap(l.what, err)
	}
	if len(out) == 0 {
		return out, pos, false, false, nil
	}
	if !snap {
		return out, last, more, false, nil
	}
	running, err := runningTransactions(snapTaken)
	if err != nil {
		return out, pos, false, false, fmt.Errorf("%s: %w", l.what, err)
	}
	maxOpen := l.maxOpen
	if maxOpen <= 0 {
		maxOpen = store.MaxOpenTransactions
	}
	k, next := fitOpen(pos, places, running, peeked, peek, maxOpen)
	if k == 0 {
		return out, pos, false, false, l.db.wrap(l.what, fmt.Errorf("more transactions were running below the page's first row than a cursor holds (%d): %w",
			maxOpen, errTooManyOpen))
	}
	if k < len(out) {
		clear(out[k:])
		return out[:k], next, true, true, nil
	}
	return out, next, more, false, nil
}

// fitOpen returns how many of a page's rows, read oldest first on
// Postgres from pos, at places (in list order), it keeps so that the
// cursor after them carries at most maxOpen running transactions, and
// that cursor (advance's, with running, peeked and peek as the page read
// them); 0 when not even the first row fits. The transactions a cursor
// carries are those below its row, so a shorter page carries no more.
func fitOpen(pos store.ListPosition, places []store.ListPosition, running []uint64, peeked bool, peek uint64, maxOpen int) (int, store.ListPosition) {
	for k := len(places); k > 0; k-- {
		if k < len(places) {
			peeked, peek = true, places[k].Order
		}
		if next := advance(pos, places[k-1], running, peeked, peek); len(next.Open) <= maxOpen {
			return k, next
		}
	}
	return 0, store.ListPosition{}
}

// errTooManyOpen: a page read oldest first on Postgres ended above more
// running transactions than a cursor holds; reading it again later
// succeeds once they ended.
var errTooManyOpen = errors.New("too many running transactions to page past")

// advance returns the position after a page read oldest first on
// Postgres from pos, whose last request is at last, by a statement whose
// snapshot had running (ascending) as its running transactions; peek is
// the list order of the row after last, when peeked (see the comment at
// the top of this file).
func advance(pos, last store.ListPosition, running []uint64, peeked bool, peek uint64) store.ListPosition {
	if pos.Order < last.Order || (pos.Order == last.Order && pos.ID < last.ID) {
		// The page passed pos: every request of pos.Open that its read
		// saw came before last and is on it.
		next := store.ListPosition{Order: last.Order, ID: last.ID}
		for _, x := range running {
			if x < last.Order {
				next.Open = append(next.Open, x)
			}
		}
		return next
	}
	// The page ended among the requests of pos.Open (they come before
	// pos): keep those still running, those not reached, and last's own
	// transaction when its next request did not fit.
	next := store.ListPosition{Order: pos.Order, ID: pos.ID}
	for _, x := range pos.Open {
		_, isRunning := slices.BinarySearch(running, x)
		if isRunning || x > last.Order || (x == last.Order && peeked && peek == x) {
			next.Open = append(next.Open, x)
		}
	}
	return next
}

// runningTransactions reads the running transactions of a pg_snapshot's
// text ("xmin:xmax:xip,..."), ascending.
func runningTransactions(snapshot string) ([]uint64, error) {
	parts := strings.Split(snapshot, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("snapshot %q: want xmin:xmax:xip", snapshot)
	}
	if parts[2] == "" {
		return nil, nil
	}
	xs := strings.Split(parts[2], ",")
	out := make([]uint64, len(xs))
	for i, x := range xs {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("snapshot %q: %w", snapshot, err)
		}
		out[i] = v
	}
	slices.Sort(out)
	return out, nil
}

// createInsert is CreateRequest's INSERT of a requests row (? placeholders,
// requestColumns' values).
func createInsert(d dialect) string {
	return orderedInsert(d, "requests", requestColumns, numRequestColumns) + ` ON CONFLICT (id) DO NOTHING`
}

// orderedInsert is the INSERT of one row of a table with a list order
// (? placeholders for the n columns cols): on SQLite it takes the next
// list order from the counter (migration 24), on Postgres the column's
// default is the creating transaction's id.
func orderedInsert(d dialect, table, cols string, n int) string {
	if _, ok := d.(*sqliteDialect); ok {
		return `INSERT INTO ` + table + ` (` + cols + `, list_order) VALUES (` + placeholders(n) +
			`, (SELECT last + 1 FROM list_orders WHERE id = 1))`
	}
	return `INSERT INTO ` + table + ` (` + cols + `) VALUES (` + placeholders(n) + `)`
}

// A listSource is what a list pages through: a table with list_order and
// id columns, the select list its rows are read by (FROM the table without
// an alias), the conditions of its filter (joined by AND; ? placeholders)
// with their arguments, and its direction.
type listSource struct {
	table string
	cols  string
	where []string
	args  []any
	desc  bool
}

// requestList is the listSource of the approvals list for f.
func requestList(f store.Filter) listSource {
	where, args := listFilter(f)
	return listSource{table: "requests", cols: requestSelect, where: where, args: args, desc: f.Descending}
}

// listQuery returns the query of one batch of the list src after pos,
// at most limit rows plus one more that tells whether a next batch
// exists (? placeholders), and its arguments. Its rows are src.cols', the
// list order as text, and for a read oldest first on Postgres (pg) the
// statement's snapshot as text.
func listQuery(src listSource, pos store.ListPosition, limit int, pg bool) (string, []any) {
	where, args := slices.Clone(src.where), slices.Clone(src.args)
	orderText, orderArg := `list_order`, `?`
	var posOrder any = int64(pos.Order) //nolint:gosec // G115: SQLite's counter, far below 2^63
	if pg {
		orderText, orderArg, posOrder = `list_order::text`, `?::xid8`, strconv.FormatUint(pos.Order, 10)
	}
	cols := src.cols + `, ` + orderText + ` AS lo`
	atStart := pos.Order == 0 && pos.ID == ""
	if src.desc {
		if !atStart {
			where = append(where, `(list_order, id) < (`+orderArg+`, ?)`)
			args = append(args, posOrder, string(pos.ID))
		}
		return `SELECT ` + cols + ` FROM ` + src.table + whereClause(where) + ` ORDER BY list_order DESC, id DESC LIMIT ?`, append(args, limit+1)
	}
	after, afterArgs := slices.Clone(where), slices.Clone(args)
	if !atStart {
		after = append(after, `(list_order, id) > (`+orderArg+`, ?)`)
		afterArgs = append(afterArgs, posOrder, string(pos.ID))
	}
	if !pg {
		return `SELECT ` + cols + ` FROM ` + src.table + whereClause(after) + ` ORDER BY list_order, id LIMIT ?`, append(afterArgs, limit+1)
	}
	if len(pos.Open) == 0 {
		return `SELECT ` + cols + `, pg_current_snapshot()::text FROM ` + src.table + whereClause(after) + ` ORDER BY list_order, id LIMIT ?`, append(afterArgs, limit+1)
	}
	// The rows of the transactions that were running below pos, then
	// those after pos, in one statement (one snapshot).
	open := make([]string, len(pos.Open))
	for i, x := range pos.Open {
		open[i] = strconv.FormatUint(x, 10)
	}
	opened := append(slices.Clone(where), `list_order = ANY(?::xid8[])`)
	openArgs := append(slices.Clone(args), `{`+strings.Join(open, `,`)+`}`)
	q := `SELECT u.*, pg_current_snapshot()::text FROM (
		(SELECT ` + cols + ` FROM ` + src.table + whereClause(opened) + ` ORDER BY list_order, id LIMIT ?)
		UNION ALL
		(SELECT ` + cols + ` FROM ` + src.table + whereClause(after) + ` ORDER BY list_order, id LIMIT ?)
	) AS u ORDER BY u.lo::xid8, u.id LIMIT ?`
	all := append(append(openArgs, limit+1), afterArgs...)
	return q, append(all, limit+1, limit+1)
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return ` WHERE ` + strings.Join(conds, ` AND `)
}

// listFilter returns the conditions of f (to be joined by AND) and their
// arguments.
func listFilter(f store.Filter) (where []string, args []any) {
	add := func(cond string, vs ...any) {
		where = append(where, cond)
		args = append(args, vs...)
	}
	switch {
	case f.State != "":
		add(`state = ?`, string(f.State))
	case f.Decided:
		add(`state <> ?`, string(approval.StatePending))
	}
	if f.Server != "" {
		add(`server = ?`, f.Server)
	}
	if f.Tool != "" {
		add(`tool = ?`, f.Tool)
	}
	if !f.CreatedFrom.IsZero() {
		add(`created_at >= ?`, store.Millis(f.CreatedFrom).UnixMilli())
	}
	if !f.CreatedBefore.IsZero() {
		add(`created_at < ?`, store.Millis(f.CreatedBefore).UnixMilli())
	}
	if f.RequestedBy != "" {
		add(`requested_by = ?`, f.RequestedBy)
	}
	if f.Tenant != "" {
		add(`tenant = ?`, f.Tenant)
	}
	switch f.Kind {
	case "":
	case approval.KindToolCall:
		add(`kind IN ('', 'tool_call')`)
	default:
		add(`kind = ?`, f.Kind)
	}
	if f.Target != "" {
		add(`target = ?`, f.Target)
	}
	if f.IDPrefix != "" {
		// The range lets the primary key index narrow the scan; substr
		// makes the match exact.
		add(`id >= ? AND substr(id, 1, length(CAST(? AS TEXT))) = ?`, f.IDPrefix, f.IDPrefix, f.IDPrefix)
	}
	if f.IDSuffix != "" {
		// No index helps here: this scans the rows the other conditions
		// leave (short ids are typed by people, rarely).
		add(`length(id) >= length(CAST(? AS TEXT)) AND substr(id, length(id) - length(CAST(? AS TEXT)) + 1) = ?`, f.IDSuffix, f.IDSuffix, f.IDSuffix)
	}
	return where, args
}
