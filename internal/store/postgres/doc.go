// Package postgres is the store.Store backend for many gateway instances
// sharing one PostgreSQL database (pgx v5, pgxpool).
//
// Every read-modify-write ([DB.UpdateRequest]) locks its row with SELECT …
// FOR UPDATE inside one transaction, and its UPDATE is also conditional on
// the state it read, so two decisions on one request, from any instances,
// can never both win. Each transaction that writes events takes one
// transaction-scoped advisory lock just before inserting them, so event
// sequence numbers are assigned in commit order and a reader paging with
// [DB.Events] never skips an event committed late. In the same transaction
// as every change that writes events (including the creation), it sends
// pg_notify on the channel [Channel] with the payload "<id> <state>";
// [DB.Watch] LISTENs on a dedicated connection and turns those into
// wake-ups, with a slow poll as a safety net.
//
// The schema is created by the embedded, forward-only migrations in
// migrations/, applied by [Open] under an advisory lock so instances
// starting together migrate once. Tables are unqualified, so the DSN's
// search_path chooses the schema. Times come from Go, never from now(), and
// are stored as bigint unix milliseconds UTC. Arguments (the display copy)
// and the JSON lists are stored as text, byte for byte; the database
// encoding must be UTF8.
package postgres
