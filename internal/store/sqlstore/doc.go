// Package sqlstore is the store.Store of toolgate: one implementation over
// database/sql that serves SQLite (modernc.org/sqlite, no cgo; one file
// shared by the processes of one host) and PostgreSQL (pgx through its
// stdlib package; many gateway instances), chosen by [Config.Driver].
//
// Every query, the row codec and the transactions are written once, with ?
// placeholders. What differs between the two databases is a small, named
// dialect (dialect.go): placeholders (? or $n), row locks (SELECT … FOR
// UPDATE on Postgres; SQLite's IMMEDIATE transactions hold the database's
// write lock from BEGIN), named locks (Postgres transaction-scoped advisory
// locks), error classification (busy/serialization conflicts to retry,
// unavailable database), the schema migrations (types differ: migrations/
// holds one directory per dialect), and the change feed [DB.Watch]
// (SQLite: PRAGMA data_version polled on one dedicated connection;
// Postgres: LISTEN/NOTIFY on a dedicated pgx connection, with reconnects,
// backoff and a safety poll).
//
// Every write goes through one helper, DB.inTx, which runs a function in
// one transaction and retries the whole transaction on SQLite busy errors
// and Postgres serialization failures or deadlocks (so the function must be
// safe to run again). Inside it, tx rebinds placeholders, locks rows
// (tx.forUpdate) and named locks (tx.lock), and writes event rows
// (tx.writeEvents, which on Postgres also sends the NOTIFY of the change).
// A new table is one migration per dialect under migrations/ and one Go
// file using inTx; nothing else changes.
//
// Times come from Go, never from the database clock, and are stored as
// INTEGER/bigint unix milliseconds UTC. Arguments (the display copy) and
// the JSON lists are stored as text, byte for byte; a Postgres database's
// encoding must be UTF8. Migrations are embedded and forward-only; the
// version table (schema_migrations) and the numbering are those of the
// earlier per-database packages (internal/store/sqlite and
// internal/store/postgres), so their databases open and migrate unchanged.
// A Postgres index build on a table that can be large is a migration of
// its own marked to run outside a transaction (noTxMarker, pgmigrate.go:
// CREATE INDEX CONCURRENTLY, which holds no write back).
package sqlstore
