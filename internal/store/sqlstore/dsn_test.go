package sqlstore

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckDSN: a connection string pgx cannot parse is ErrBadDSN with
// pgx's reason, and the error never shows the password, however the
// string is written (pgconn's own error shows "password = x" in a
// key=value string, and a URL that does not parse whole).
func TestCheckDSN(t *testing.T) {
	tests := []struct {
		name, dsn string
		want      string // "" for a DSN that parses
	}{
		{"url", "postgres://u:s3cret@127.0.0.1:5432/db?sslmode=disable", ""},
		{"key value", "host=127.0.0.1 user=u password=s3cret dbname=db", ""},
		{"bad escape", "postgres://u:s3cret@h/%zz", "failed to parse as URL"},
		{"bad sslmode", "postgres://u:s3cret@h/db?sslmode=bogus", "sslmode is invalid"},
		{"spaced password", "host=h password = s3cret sslmode=bogus", "sslmode is invalid"},
		{"quoted password", "host=h password='s3 cret' sslmode=bogus", "sslmode is invalid"},
		{"bad pool option", "postgres://u:s3cret@h/db?pool_max_conns=many", "pool_max_conns"},
		{"bad port", "postgres://u:s3cret@h:notaport/db", "invalid port"},
		{"not a dsn", "not a dsn s3cret", "failed to parse as keyword/value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckDSN(tt.dsn)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckDSN = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrBadDSN) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckDSN = %v, want ErrBadDSN naming %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3") {
				t.Errorf("CheckDSN error shows the password or the string: %v", err)
			}
		})
	}
}
