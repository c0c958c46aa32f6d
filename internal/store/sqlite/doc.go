// Package sqlite is the embedded store.Store backend: one SQLite file
// (modernc.org/sqlite, no cgo) shared by the goroutines of one process and
// by any other toolgate process on the same host.
//
// Every write is an IMMEDIATE transaction, so a read-modify-write
// ([DB.UpdateRequest]) holds the write lock from its first read and two
// decisions on one request can never both win. Other processes' commits are
// noticed by [DB.Watch], a cheap poll of PRAGMA data_version. The schema is
// created by the embedded, forward-only migrations in migrations/. Times are
// stored as INTEGER unix milliseconds UTC.
package sqlite
