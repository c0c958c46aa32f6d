package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"toolgate/internal/store"
)

// A dialect is all that differs between the databases the store runs on;
// the queries, the row codec and the transactions are shared. There are two:
// sqliteDialect (sqlite.go) and postgresDialect (postgres.go).
type dialect interface {
	// name is the driver (DriverSQLite or DriverPostgres); it also names
	// the dialect's directory under migrations/.
	name() string
	// rebind rewrites a query written with ? placeholders for the database.
	rebind(query string) string
	// txOptions is what txOnce's transactions begin with: nil on SQLite,
	// whose IMMEDIATE transactions are serial; READ COMMITTED on Postgres,
	// whatever the server, database or role make the default. They are
	// written for it (a statement that waited for a lock sees what
	// committed meanwhile: the lease renewal's count after the instance
	// row, the conditional writes' re-checks): under REPEATABLE READ a
	// renewal counted from a snapshot taken before its wait and kept a
	// request another instance had taken over
	// (TestRenewalSeesTakeOverWhateverTheDefaultIsolation). Asked per
	// transaction, not as a startup parameter, which a pooler such as
	// PgBouncer may refuse; the same one statement and round trip as
	// BEGIN. (pgLock's pipelined writes keep the default: they lock all
	// they read.)
	txOptions() *sql.TxOptions
	// forUpdate is the clause that, appended to a SELECT inside inTx,
	// locks the rows it reads until the transaction ends: " FOR UPDATE" on
	// Postgres; "" on SQLite, whose IMMEDIATE transactions hold the
	// database's write lock from BEGIN, so no other writer can come
	// between a read and the write that follows it.
	forUpdate() string
	// lock takes the named lock l until t ends: a transaction-scoped
	// advisory lock on Postgres; nothing on SQLite (see forUpdate).
	lock(ctx context.Context, t *tx, l lockName) error
	// lockShared takes l shared until t ends: it waits for a holder of
	// lock, not for other shared holders (Postgres: a shared
	// transaction-scoped advisory lock); nothing on SQLite.
	lockShared(ctx context.Context, t *tx, l lockName) error
	// notices returns the notifications that tell other instances about
	// the changes whose event rows evs are, sent once the transaction
	// committed (pgNotifier): Postgres's; none on SQLite, where Watch sees
	// any commit through PRAGMA data_version.
	notices(evs []event) []notice
	// feedQuery is the query of DB.Feed: the events after the cursor in
	// feed order, at most limit, selecting cols (eventColumns, or
	// watchColumns for the watch) and then the transaction order key as
	// text (see store.Cursor). It must never return an event while one
	// before it in feed order can still commit.
	feedQuery(cols string, after store.Cursor, limit int) (string, []any)
	// feedEndQuery selects the transaction order key (as text) and seq of
	// the last event feedQuery could return now; no row for an empty log.
	feedEndQuery() string
	// lockKey takes the lock on (space, key) until t ends: a
	// transaction-scoped advisory lock on Postgres, keyed by the pair
	// (space, FNV-1a of key), apart from the lockName keys; nothing on
	// SQLite.
	lockKey(ctx context.Context, t *tx, space lockSpace, key string) error
	// retryable reports a conflict after which the whole transaction is
	// worth running again: SQLite busy or locked past the busy timeout;
	// Postgres serialization failure or deadlock.
	retryable(err error) bool
	// unavailable reports an error that means the database cannot be
	// reached or used (see DB.wrap for what every dialect adds).
	unavailable(err error) bool
	// schemaMigrationsDDL creates the version table of the migrations if it
	// does not exist.
	schemaMigrationsDDL() string
	// watch is DB.Watch for this database, run until ctx is done.
	watch(ctx context.Context, db *DB, w watchFuncs)
	// close releases what the dialect holds besides the *sql.DB (the
	// Postgres pool), after the *sql.DB was closed.
	close()
}

// A lockName names a lock that transactions take with tx.lock (Postgres:
// the key of a transaction-scoped advisory lock; one 64-bit key space per
// database). The keys spell "toolgate" in ASCII plus a small offset per
// purpose; they are shared with every toolgate version running against the
// same database (a rolling upgrade), so they never change.
type lockName int64

const (
	lockKeyBase lockName = 0x746f6f6c67617465
	lockMigrate          = lockKeyBase // held by the migrating connection (Postgres: at session level, pgMigrate; older binaries: by their migrating transaction)
	// lockEvents was held by each transaction that wrote events, up to
	// the release that added the change feed's transaction ids; it is
	// no longer taken.
	lockEvents   = lockKeyBase + 1
	lockSessions = lockKeyBase + 2 // held by child creations and revocations
	lockPolicy   = lockKeyBase + 3 // held by each transaction that appends a policy revision; shared by consumes that read the newest (store.TxReads)
)

// A lockSpace is a family of locks keyed by a string (tx.lockKey): the
// first key of Postgres' two-key advisory locks, which never collide with
// the one-key lockName locks. The values spell "tg" and a purpose number;
// they never change.
type lockSpace int32

const (
	lockSpaceBase        lockSpace = 0x74670000
	lockPendingPrincipal           = lockSpaceBase + 1 // creators of one principal's requests (CapPrincipal)
	lockPendingTree                = lockSpaceBase + 2 // creators in one session tree (CapSessionTree), and its revocations
	lockPendingTotal               = lockSpaceBase + 3 // creators counting every pending request (CapTotal)
	lockPolicyRequests             = lockSpaceBase + 4 // creators of one session's policy requests (CapPolicyRequests)
)

func (l lockName) String() string {
	switch l {
	case lockMigrate:
		return "migrations"
	case lockEvents:
		return "events"
	case lockSessions:
		return "sessions"
	case lockPolicy:
		return "policy"
	}
	return "lock " + strconv.FormatInt(int64(l), 16)
}

// placeholders returns "?, ?, …" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// inSize is how many marks an IN list of n values is written with: n
// rounded up to a power of two (1 for n ≤ 1). The statement caches (the
// store's own for SQLite, stmtCache; pgx's for Postgres) key on the
// query's text, so lists of every length would fill them with statements
// used once, after which SQLite's cache prepares nothing more; rounded,
// one site has at most eleven texts for lists of up to 1,024 values.
func inSize(n int) int {
	size := 1
	for size < n {
		size <<= 1
	}
	return size
}

// inList returns the marks of an IN list of vals (inSize(len(vals)) of
// them) and the statement's arguments: first, then vals, then copies of
// vals' last value up to the marks' count (IN reads a repeated value as
// the list without it). vals must not be empty.
func inList(vals []any, first ...any) (marks string, args []any) {
	n := inSize(len(vals))
	args = make([]any, 0, len(first)+n)
	args = append(args, first...)
	args = append(args, vals...)
	for len(args) < len(first)+n {
		args = append(args, vals[len(vals)-1])
	}
	return placeholders(n), args
}

// dollarPlaceholders rewrites the ? placeholders of q as $1, $2, … in
// order (Postgres). A ? inside a single-quoted string literal, a
// double-quoted identifier or a -- comment is left alone. It does not
// know escape strings (E'…'), dollar quoting or the jsonb ? operators;
// the store's queries use none of them.
func dollarPlaceholders(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	return dollarJoin(q)
}

// dollarJoin is dollarPlaceholders of the concatenation of parts, built
// in one allocation (the concatenation and then its rewrite were two, for
// each of a request write's statements: ≈ 1.3 KB per approval). The
// placeholders are numbered across the parts; a quote or comment must end
// in the part it begins in.
func dollarJoin(parts ...string) string {
	size, marks := 0, 0
	for _, q := range parts {
		size += len(q)
		marks += strings.Count(q, "?")
	}
	var (
		b strings.Builder
		n int
	)
	b.Grow(size + marks*digits(marks))
	for _, q := range parts {
		appendDollar(&b, q, &n)
	}
	return b.String()
}

// digits is the number of decimal digits of n ≥ 0.
func digits(n int) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// appendDollar writes q to b with its ? placeholders rewritten as $n+1,
// $n+2, … (dollarPlaceholders), and adds their number to *n.
func appendDollar(b *strings.Builder, q string, n *int) {
	var quote byte // the quote we are inside, or 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0 // a doubled quote reopens at once; nothing to rewrite in between
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				end = len(q) - i
			}
			b.WriteString(q[i : i+end])
			i += end - 1
			continue
		case c == '?':
			*n++
			var d [20]byte
			b.WriteByte('$')
			_, _ = b.Write(strconv.AppendInt(d[:0], int64(*n), 10)) // strconv.Itoa allocates from 100 on
			continue
		}
		b.WriteByte(c)
	}
}

// unindexedState is the column state as an expression no index covers,
// for the guard of a write that names its row by primary key: a
// compare-and-set such as "id = ? AND state = ?". Compared as the bare
// column, the guard matches an index led by it (requests_state_expires,
// deliveries_due), and with statistics that say the guarded value is rare
// (gathered while every request was pending, every delivery delivered)
// Postgres plans the write through that index and filters every entry in
// that state on id. Through the expression only the primary key can find
// the row; the guard still holds in the same WHERE clause (state is
// text, so state with the empty string appended is state; NULL stays NULL).
// TestGuardedWritesFindTheirRowByID.
const unindexedState = `(state || '')`

// unindexedLive is liveLease (pending, approved, or consumed without a
// dispatch outcome) with state compared through unindexedState, for a
// statement that names its rows by primary key (RenewLeases' mark of the
// ids it holds, Prune's openAmong). With the bare column the condition
// is a BitmapOr of requests_state_expires (pending, approved) and
// requests_undispatched, and with statistics that say live requests are
// rare (gathered while every request was settled, before a burst of held
// calls) Postgres planned the statements through it, reading every live
// request for each list of ids (plans39). Through the expression neither
// index matches, so only the primary key can find the rows; the condition
// is the same. TestIDListsFindTheirRowsByID.
const unindexedLive = `(` + unindexedState + ` IN ('pending', 'approved') OR (` +
	unindexedState + ` = 'consumed' AND dispatch_outcome = ''))`

// unindexedMarked is "lease_until = leaseMarker" as an expression that
// does not imply the predicate of the partial index requests_instance_held
// (migration 18), for a statement that names its rows by primary key and
// asks whether they are marked (RenewLeases' unmark, pgLockLease). Beside
// held_by, or alone with that index's INCLUDE (id), the bare comparison
// let Postgres read the index and filter every request marked for the
// holder (or for any holder) on id when statistics said few were marked
// (gathered while the instance held none). lease_until + 0 is lease_until
// (a bigint; NULL stays NULL). TestIDListsFindTheirRowsByID.
const unindexedMarked = `(lease_until + 0) = 253402300799999`
