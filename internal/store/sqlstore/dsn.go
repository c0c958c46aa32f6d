package sqlstore

import (
	"errors"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrBadDSN is the error CheckDSN (and Open, for DriverPostgres) returns
// for a connection string pgx cannot parse.
var ErrBadDSN = errors.New("invalid Postgres connection string")

// CheckDSN reports whether Open could parse dsn as a Postgres connection
// string (a libpq URL or key=value string, pool_* keys included), without
// connecting. Its error says what is wrong and never contains dsn, which
// may hold a password (pgconn redacts passwords only on a best-effort
// basis, and a URL that does not parse is quoted whole).
func CheckDSN(dsn string) error {
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		return dsnError(err)
	}
	return nil
}

// dsnError turns an error of pgxpool.ParseConfig into one that names the
// problem without the connection string.
func dsnError(err error) error {
	const want = "; want postgres://user@host:5432/dbname?sslmode=... or key=value pairs (host=... dbname=...)"
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return &dsnErr{msg: "cannot parse it" + want}
	}
	// pe.Error() is "cannot parse `<redacted dsn>`: <msg>", followed by
	// " (<cause>)" when there is a cause; <msg> is one of pgconn's fixed
	// phrases ("failed to parse as URL", "sslmode is invalid", ...).
	s := pe.Error()
	cause := pe.Unwrap()
	if cause != nil {
		s = strings.TrimSuffix(s, " ("+cause.Error()+")")
	}
	msg := "cannot parse it" + want
	if i := strings.LastIndex(s, "`: "); i >= 0 {
		msg = s[i+len("`: "):]
	}
	var ue *url.Error
	if errors.As(cause, &ue) {
		cause = ue.Err // *url.Error quotes the whole URL
	}
	if cause != nil {
		msg += " (" + cause.Error() + ")"
	}
	if strings.HasPrefix(msg, "failed to parse as") {
		msg += want // the string's shape is wrong, not one of its settings
	}
	return &dsnErr{msg: msg}
}

// dsnErr is ErrBadDSN with its reason.
type dsnErr struct{ msg string }

func (e *dsnErr) Error() string { return ErrBadDSN.Error() + ": " + e.msg }
func (e *dsnErr) Unwrap() error { return ErrBadDSN }
