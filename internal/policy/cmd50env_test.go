package policy

import "testing"

// TestCommandCmd50EnvOptions (cmd50): compressors' options from the
// environment name the file written (xz -S, gzip -S), and PYTHONSTARTUP a
// file python runs. On 3eefbceb a deny rule for "rm *" saw none of them
// (an allow rule refuses every assignment already); env's NAME=value words
// were allowed by an allow rule for "env *".
func TestCommandCmd50EnvOptions(t *testing.T) {
	bypass := []string{
		`XZ_OPT='-S rc' xz ~/.bash`,
		`env XZ_OPT=-Sx tar -cJf a.tar.xz src`,
		`GZIP='-S rc' gzip ~/.bash`,
		`BZIP2=-v bzip2 x`,
		`env PYTHONSTARTUP=./x.py python3 -i app.py`,
	}
	fine := []string{
		`ZSTD_CLEVEL=19 zstd x`,
		`tar -cJf a.tar.xz src`,
		`env LANG=C tar -cJf a.tar.xz src`,
	}
	checkCommands(t, []string{"env *", "tar *", "xz *", "gzip *", "bzip2 *", "zstd *", "python3 *"},
		bypass, fine, bypass, fine[1:])
}
