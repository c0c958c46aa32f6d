package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrationFiles holds the forward-only schema migrations, named
// NNNN_description.sql and applied in version order.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", base)
		}
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations embedded")
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share a version", ms[i-1].name, ms[i].name)
		}
	}
	return ms, nil
}

// migrate applies the migrations not yet recorded in schema_migrations, all
// in one transaction that first takes a transaction-scoped advisory lock
// (pg_advisory_xact_lock), so instances starting together apply each
// migration once: the others wait for the lock, then (READ COMMITTED) see
// the recorded versions. A schema newer than this binary knows is an error.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("read migrations: %w", err)
	}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockID); err != nil {
			return fmt.Errorf("lock for migrations: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    bigint PRIMARY KEY,
			name       text NOT NULL,
			applied_at bigint NOT NULL
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if latest := ms[len(ms)-1].version; current > latest {
			return fmt.Errorf("database schema version %d is newer than this binary's %d", current, latest)
		}
		for _, m := range ms {
			if m.version <= current {
				continue
			}
			// No arguments: pgx sends it with the simple protocol, which
			// runs the file's several statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.version, m.name, db.now().UnixMilli()); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
			db.log.DebugContext(ctx, "applied migration", "migration", m.name)
		}
		return nil
	})
	if err != nil {
		return db.wrap("migrate", err)
	}
	return nil
}
