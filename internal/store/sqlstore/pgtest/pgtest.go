// Package pgtest gives tests throwaway databases on the Postgres server
// that scripts/test.sh starts: a real server, not a mock (STYLE R22). It
// imports nothing of toolgate, so the store's own tests can use it too.
//
// The server is named by TOOLGATE_TEST_POSTGRES (a postgres:// URL or a
// key=value DSN whose role may create databases). Without it a test that
// needs Postgres is skipped, or fails when TOOLGATE_REQUIRE_POSTGRES=1
// (scripts/test.sh sets both).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DSN returns TOOLGATE_TEST_POSTGRES, skipping tb when it is not set (or
// failing it when TOOLGATE_REQUIRE_POSTGRES=1).
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv("TOOLGATE_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("TOOLGATE_REQUIRE_POSTGRES") == "1" {
			tb.Fatal("TOOLGATE_TEST_POSTGRES is not set")
		}
		tb.Skip("needs a Postgres server: set TOOLGATE_TEST_POSTGRES (scripts/test.sh starts one)")
	}
	return dsn
}

// Fresh creates an empty database with a random name on the server of
// DSN, drops it (closing its connections) when tb ends, and returns its
// DSN.
func Fresh(tb testing.TB) string {
	tb.Helper()
	dsn := DSN(tb)
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "tg_" + hex.EncodeToString(b[:])
	admin := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(ctx) }()
		_, err = conn.Exec(ctx, sql)
		return err
	}
	ident := pgx.Identifier{name}.Sanitize()
	if err := admin(tb.Context(), `CREATE DATABASE `+ident); err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	out, err := WithDatabase(dsn, name)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// WithDatabase returns dsn (a URL or key=value string) naming database
// name instead of its own.
func WithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse TOOLGATE_TEST_POSTGRES: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil // a later keyword wins
}
