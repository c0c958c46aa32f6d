package policy

import "testing"

// TestCommandReview49bOptionPrefixes (review49b): ag, ack, sdiff, diff3,
// pandoc and less read a unique prefix of a long option as the option
// (getopt_long, Getopt::Long, GetOpt, less's own table), and ugrep+ and
// ug+ are ugrep. On 28089b9d each below ran a program named in an option,
// or wrote a guarded file, that a deny rule for "rm *" did not see and an
// allow rule for the tool allowed.
func TestCommandReview49bOptionPrefixes(t *testing.T) {
	bypass := []string{
		`ag --pag='rm -rf x' foo`,
		`ag --pag 'rm -rf x' foo`,
		`ack --pag='rm -rf x' foo`,
		`ack --ackr=evilrc foo`,
		`sdiff --diff-prog=./evil a b`,
		`diff3 --diff=./evil a b c`,
		`pandoc --filt ./evil in.md`,
		`pandoc --lua-f=./evil.lua in.md`,
		`less --log-f=.git/hooks/pre-commit x`,
		`less --LOG-F .git/hooks/pre-commit x`,
		`ugrep+ --filter='txt:rm -rf x' foo`,
		`ug+ --pager='rm -rf x' foo`,
	}
	fine := []string{
		`ag foo src`,
		`ag --literal -G '\.go$' foo`,
		`ack --type=go foo`,
		`sdiff a b`,
		`diff3 a b c`,
		`pandoc --from markdown -o out.html in.md`,
		`less --line-numbers log.txt`,
		`less --log-file=/tmp/less.log log.txt`,
		`ugrep+ -r foo src`,
	}
	checkCommands(t, []string{"ag *", "ack *", "sdiff *", "diff3 *", "pandoc *", "less *", "ugrep+ *", "ug+ *"},
		bypass, fine, bypass, fine)
}

// TestCommandReview49bFindNames (review49b): gfind and gxargs (GNU find
// and xargs beside BSD's) and bfs take find's -exec, -execdir, -ok, -okdir
// and -fprint and xargs's command. On 28089b9d a deny rule for "rm *"
// missed each below, and the found-path reading of policy49 did not apply.
func TestCommandReview49bFindNames(t *testing.T) {
	bypass := []string{
		`gfind . -exec rm x ';'`,
		`bfs . -name x -exec rm {} +`,
		`echo x | gxargs rm`,
		`gfind . -name x -exec cp {} .git/hooks/pre-commit ';'`,
		`bfs .git/hooks -exec cp x {} ';'`,
		`echo .git/hooks/pre-commit | gxargs cp x`,
		`gfind . -maxdepth 0 -fprintf .git/hooks/pre-commit 'rm x'`,
	}
	fine := []string{
		`gfind . -name '*.go'`,
		`bfs . -name '*.go' -exec gofmt -l {} +`,
		`gfind . -name '*.go' -print0 | gxargs -0 gofmt -l`,
	}
	checkCommands(t, []string{"gfind *", "bfs *", "gxargs *", "cp *", "gofmt *", "echo *"}, bypass, fine, bypass, fine)
}

// TestCommandReview49bFdValues (review49b): fd's -tx is --type x and -ex
// --extension x (a letter that takes a value takes the rest of the
// word), not -x: on 28089b9d "fd -tx" (find executables) was refused as
// running a command; -Hx and -x still are.
func TestCommandReview49bFdValues(t *testing.T) {
	bypass := []string{`fd -Hx rm`, `fd -x rm`, `fd -HX rm`, `fd -tf -x rm`}
	fine := []string{`fd -tx`, `fd -tx -H build`, `fd -ex src`, `fd -Hex`, `fd -t f -e go`}
	checkCommands(t, []string{"fd *"}, bypass, fine, bypass, fine)
}
