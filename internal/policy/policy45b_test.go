package policy

import (
	"encoding/json"
	"testing"
)

// TestCommandPolicy45bRunners (policy45b): spellings of the policy45
// checks' programs and options that fa809bf9 missed: a deny rule for
// "rm *" allowed each string in the first list and an allow rule for the
// program allowed it (the third list): a program name in upper case or
// with .exe (macOS and Windows find TAR as tar), vim.basic, make's
// 'SHELL =' with a space, gdb's early-init options, emacsclient -e, emacs
// reading Lisp from its input, mysql's pager, plugins and tee, flock -xc.
func TestCommandPolicy45bRunners(t *testing.T) {
	runners := []string{
		`TAR --to-command='rm x' -xf a.tar`,
		`tar.exe --to-command='rm x' -xf a.tar`,
		`sudo nice timeout 5 TAR --to-command='rm x' -xf a.tar`,
		`vim.basic -c '!rm x' f`,
		`make 'SHELL =./x' all`,
		`make ' SHELL=./x'`,
		`gdb -batch -eiex 'shell rm x' ./a`,
		`gdb -batch --early-init-eval-command='shell rm x' ./a`,
		`gdb -batch -eix /dev/stdin ./a`,
		`emacsclient -e '(shell-command "rm x")'`,
		`emacs --batch -l /dev/stdin`,
		`emacs --script=/dev/stdin`,
		`mysql --pager='rm x' -e 'select 1'`,
		`mysql -e 'pager rm x; select 1'`,
		`mysql --plugin-dir=. --default-auth=x -e 'select 1'`,
		`flock /tmp/l -xc 'rm x'`,
		`flock -nc 'rm x' /tmp/l`,
	}
	checkCommands(t, []string{"tar *", "TAR *", "tar.exe *", "vim.basic *", "make *", "gdb *", "emacs *", "emacsclient *", "mysql *", "flock *", "sudo *"},
		runners,
		[]string{
			`make install PREFIX=/usr/local`,
			`emacs --batch -l build.el`,
			`emacs --script build.el`,
			`mysql --tee=session.log -e 'select 1'`,
			`flock -x /tmp/l make`,
			`flock -w 5 /tmp/l make`,
			`gdb -batch -ex bt ./a core`,
		},
		runners,
		[]string{`tar -xzf a.tgz`, `make -j4 test`, `emacs --batch -l build.el`, `mysql -u root -e 'show databases'`, `flock -x /tmp/l make`},
	)
}

// TestCommandPolicy45bWrites (policy45b): writes of files a program runs
// as code that fa809bf9 missed: a source copied into a directory lands
// there under its own name (cp x/.bashrc ~, mv x/Makefile ., cp -r hooks
// .git), a tree copied into a home directory, cp -t with the directory
// attached, paths in other case (the same file on macOS and Windows),
// sed's w command and s///w flag, sed's long options abbreviated (--in,
// --exp), find -fprintf, psql -o and mysql --tee.
// A deny rule for "rm *" allowed each, and an allow rule for the writer
// allowed each.
func TestCommandPolicy45bWrites(t *testing.T) {
	writes := []string{
		`cp -t.git/hooks x`,
		`cp -vt.git/hooks pre-commit`,
		`cp x ~/.BASHRC`,
		`cp x .GIT/Hooks/pre-commit`,
		`cp x/.bashrc ~`,
		`cp x/.bashrc ~/`,
		`cp -t ~ x/.zshrc`,
		`cp -r hooks .git`,
		`cp evil/config .git`,
		`cp -a skel/. ~`,
		`cp -r d /root`,
		`rsync -a dots/ ~/`,
		`mv x/Makefile .`,
		`cp x/Makefile ./`,
		`ln -s ../x/.bashrc ~`,
		`install x/pre-commit .git/hooks`,
		`sed -n 'w .git/hooks/pre-commit' x`,
		`sed 's/^/rm x;/w Makefile' f`,
		`sed -e '1W /home/a/.profile' f`,
		`sed --in 1d ~/.bashrc`,
		`sed --in-pl=.bak 's/^/rm x;/' ~/.profile`,
		`sed --exp 's/a/b/' --exp 'e rm x' f`,
		`sed --exp=1d --exp='w Makefile' f`,
		`find . -maxdepth 0 -fprintf ~/.bashrc 'rm x\n'`,
		`find . -fprint .git/hooks/pre-commit`,
		`psql -At -c "select 'rm x'" -o ~/.bashrc`,
		`psql -c 'select 1' --output=Makefile`,
		`mysql --tee=.bashrc -e 'select 1'`,
		`cp x ~/.ssh/authorized_keys`,
		`tee -a /root/.ssh/environment`,
	}
	checkCommands(t, []string{"cp *", "mv *", "ln *", "rsync *", "install *", "sed *", "find *", "psql *", "mysql *"},
		writes,
		[]string{
			`cp ~/.bashrc /tmp/b`,
			`cp -r src dst`,
			`cp a.go b.go src/`,
			// cp .env.example .env writes .env, guarded since branch
			// attack48 (a Makefile's "include .env" runs it as make code).
			`cp .env.example env.local`,
			`mv src/a.go src/b.go`,
			`rsync -av src/ dst/`,
			`sed -n 'w out.txt' f`,
			`sed --in 's/a/b/' main.go`,
			`find . -fprint list.txt`,
			`psql -c 'select 1' -o out.txt`,
		},
		writes,
		[]string{
			`cp ~/.bashrc /tmp/b`, `cp -r src dst`, `cp -a src/. dst/`, `mv a b`, `ln -sf target link`, `rsync -av src/ dst/`,
			`sed -i 's/a/b/' main.go`, `sed -n 'w out.txt' f`, `find . -name '*.go'`, `psql -c 'select 1' -o out.txt`,
			// install … /usr/local/bin/x writes a directory on PATH, guarded
			// since branch attack48 (install evil /usr/local/bin/git runs
			// for a later git status).
			`install -m 755 bin/x dist/x`,
		},
	)
}

// TestCommandPolicy45bEverydayAllowed (policy45b): commands an agent sends
// every day stay allowed under the allow rules docs/policy.md shows. On
// fa809bf9 "make install PREFIX=/usr/local" and "./configure
// --prefix=/usr/local" were held: the word's base name "local" was taken
// for bash's local builtin, which no word with a slash can run.
func TestCommandPolicy45bEverydayAllowed(t *testing.T) {
	allow := mustCompile(t, newPolicy(Approve, commandRule("dev", Allow, "git *", "npm *", "pnpm *", "yarn *", "go *", "make *",
		"./configure *", "tar *", "zip *", "psql *", "sqlite3 *", "find *", "xargs *", "grep *", "sed *", "cp *", "mv *", "ln *",
		"echo *", "cat *", "ls *", "env *", "nice *", "timeout *")))
	for _, c := range []string{
		`git status`, `git log --oneline -5`, `git diff HEAD~1`, `git commit -m 'fix: x'`, `git push origin main`,
		`git config user.name x`, `git config --get remote.origin.url`, `git config pull.rebase true`,
		`npm ci`, `npm run build`, `pnpm install`, `yarn test`, `go build ./...`, `go test ./...`,
		`make test`, `make -C sub test`, `make install PREFIX=/usr/local`, `make DESTDIR=out install`,
		`./configure --prefix=/usr/local`,
		`tar -xzf a.tgz`, `tar xzf a.tgz`, `tar czvf a.tgz src`, `tar -xf a.tar -C out --strip-components=1`,
		`tar cf - . | tar xf - -C out`, `tar -cf a.tar -T files.txt`, `zip -r a.zip src`, `zip -9r a.zip . -x '*.git*'`,
		`psql -c 'select 1'`, `psql -h localhost -U postgres -Atc 'select 1'`, `sqlite3 db 'select 1'`, `sqlite3 -header db .schema`,
		`find . -name '*.go'`, `find . -name '*.go' -print0 | xargs -0 grep -l x`,
		// grep -rl x . | xargs sed -i … is held since branch policy49: grep
		// -r searches .git too, and sed -i then rewrites .git/hooks/pre-commit
		// (TestCommandPolicy49FindExec).
		`grep -rl x src | xargs grep -n y`,
		`sed -i 's/a/b/' main.go`, `sed -i.bak -e 's/a/b/' src/x.go`,
		`cp -r src dst`, `cp config.example.toml config.toml`, `mv src/a.go src/b.go`, `ln -s a sub/b`, // ln -s ../a b links outside the working directory (policy49b), ln -s ../a sub/b once moved up (cmd50b)
		`env CI=1 npm test`, `env GOOS=linux go build ./...`, `nice -n 10 go test ./...`, `timeout 60 go test ./...`,
	} {
		if d := eval(t, allow, shellCall(c)); d.Effect != Allow {
			t.Errorf("%q: effect %s, want allow", c, d.Effect)
		}
	}
}

// TestCommandPolicy45bEnvironmentArguments (policy45b): environment
// arguments in forms fa809bf9 did not read, each allowed under "ls *":
// a top-level string of NAME=value words, ["NAME", "value"] pairs,
// name/value objects with other key spellings, a name with spaces, an
// object nested under another, and a value that is an array.
func TestCommandPolicy45bEnvironmentArguments(t *testing.T) {
	call := func(args map[string]any) Call {
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		return Call{Server: "shell", Tool: "run", Arguments: raw, Principal: Principal{ID: "agent-1"}}
	}
	allow := mustCompile(t, newPolicy(Approve, commandRule("ls and git", Allow, "ls *", "git *")))
	denyRm := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	held := []map[string]any{
		{"command": "ls", "env": "LD_PRELOAD=./x.so"},
		{"command": "ls", "env": "CI=1\nPATH=/tmp/x"},
		{"command": "ls", "env": []any{[]any{"LD_PRELOAD", "./x.so"}}},
		{"command": "ls", "env": []any{map[string]any{"Name": "LD_PRELOAD", "Value": "./x.so"}}},
		{"command": "ls", "env": []any{map[string]any{"key": "PATH", "value": "/tmp/x"}}},
		{"command": "ls", "env": []any{" LD_PRELOAD=./x.so"}},
		{"command": "ls", "options": map[string]any{"environment": map[string]any{"LD_PRELOAD": "./x.so"}}},
		{"command": "ls", "env": map[string]any{"LD_PRELOAD": []any{"./x.so"}}},
		{"command": "git log", "options": map[string]any{"env": map[string]any{"PAGER": "rm x"}}},
	}
	for _, a := range held {
		if d := eval(t, allow, call(a)); d.Effect == Allow {
			t.Errorf("%v: allowed, want it held", a)
		}
	}
	if d := eval(t, denyRm, call(map[string]any{"command": "git log", "options": map[string]any{"env": map[string]any{"PAGER": "rm x"}}})); d.Effect != Deny {
		t.Errorf("nested PAGER=rm x: effect %s, want deny", d.Effect)
	}
	allowed := []map[string]any{
		{"command": "ls", "options": map[string]any{"env": map[string]any{"CI": "1"}, "cwd": "/tmp"}},
		{"command": "ls", "env": "CI=1 LANG=C"},
		{"command": "ls", "env": []any{[]any{"TERM", "dumb"}}},
		{"command": "ls", "description": "list files"},
	}
	for _, a := range allowed {
		if d := eval(t, allow, call(a)); d.Effect != Allow {
			t.Errorf("%v: effect %s, want allow", a, d.Effect)
		}
	}
}
