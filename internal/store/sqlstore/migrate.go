package sqlstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// migrationFiles holds the forward-only schema migrations of each dialect,
// migrations/<driver>/NNNN_description.sql, applied in version order. The
// two directories keep the same numbering: a version adds the same tables
// and columns to both, written in each database's types.
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
	// steps, when not nil, are the statements of a Postgres migration
	// marked noTxMarker, applied one by one outside a transaction
	// (pgmigrate.go); nil for every other migration.
	steps []indexStep
}

// migrations returns the embedded migrations of the dialect named driver in
// version order.
func migrations(driver string) ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/"+driver+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", n)
		}
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		m := migration{version: v, name: base, sql: string(b)}
		if strings.HasPrefix(m.sql, noTxMarker+"\n") {
			if driver != DriverPostgres {
				return nil, fmt.Errorf("migration %s: %s is for Postgres migrations only", n, noTxMarker)
			}
			if m.steps, err = parseNoTx(m.sql); err != nil {
				return nil, fmt.Errorf("migration %s: %w", n, err)
			}
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no %s migrations embedded", driver)
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share a version", ms[i-1].name, ms[i].name)
		}
	}
	return ms, nil
}

// migrate applies the migrations not yet recorded in schema_migrations, so
// that processes or instances starting together apply each migration once:
// the others wait, then see the recorded versions. On SQLite all of them
// run in one IMMEDIATE transaction; on Postgres see pgMigrate (a session
// advisory lock, transactions between the migrations marked noTxMarker). A
// database whose schema is newer than this binary knows is an error.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrations(db.d.name())
	if err != nil {
		return fmt.Errorf("read migrations: %w", err)
	}
	if _, ok := db.d.(*postgresDialect); ok {
		if err := db.pgMigrate(ctx, ms); err != nil {
			return db.wrap("migrate", err)
		}
		return nil
	}
	err = db.inTx(ctx, func(t *tx) error {
		if err := t.lock(ctx, lockMigrate); err != nil {
			return err
		}
		current, err := db.schemaVersion(t.context(ctx), t.sql, ms)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.version <= current {
				continue
			}
			// No arguments and no rebinding: the file's statements run as
			// written (pgx then uses the simple protocol, which runs several
			// statements in one call).
			if _, err := t.sql.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if _, err := t.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, db.now().UnixMilli()); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
			db.log.DebugContext(ctx, "applied migration", "driver", db.d.name(), "migration", m.name)
		}
		return nil
	})
	if err != nil {
		return db.wrap("migrate", err)
	}
	return nil
}

// schemaVersion creates schema_migrations if it is missing and returns the
// newest version recorded in it (0: none), through on, which holds the
// migrations lock; it sets db.created. A version newer than the newest of
// ms (this binary's) is an error.
func (db *DB) schemaVersion(ctx context.Context, on txRunner, ms []migration) (int, error) {
	if _, err := on.ExecContext(ctx, db.d.schemaMigrationsDDL()); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := on.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	db.created = current == 0
	if latest := ms[len(ms)-1].version; current > latest {
		return 0, fmt.Errorf("database schema version %d is newer than this binary's %d", current, latest)
	}
	return current, nil
}

// Created reports whether Open found the database without a schema: no
// migration recorded in schema_migrations, so it applied all of them to a
// new, empty store. That holds for a SQLite file or Postgres database that
// did not exist and for one a failed earlier start left empty (a first
// start applies every migration in one transaction on both); it is false for a store
// another start had already migrated, whether or not it holds anything.
func (db *DB) Created() bool {
	return db.created
}
