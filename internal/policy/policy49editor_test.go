package policy

import "testing"

// TestCommandPolicy49bEditorInput (policy49b): git commit without a
// message starts vi, and vi reads keystrokes from its input when that is
// not a terminal, so "printf ':!rm -rf ~\n:q!\n' | git commit" ran rm
// (recipe49). A program that may start an editor whose input comes from
// the command string (a pipe, a here-string, a redirection) is opaque
// now. On f97895b4 a deny rule for "rm *" allowed each bypass and an
// allow rule for "printf *", "git *", … allowed each.
func TestCommandPolicy49bEditorInput(t *testing.T) {
	bypass := []string{
		`printf ':!rm -rf ~\n:q!\n' | git commit --allow-empty`,
		`printf ':!rm x\n' | git commit --amend`,
		`printf ':!rm x\n' | git commit -e -m x`,
		`printf ':!rm x\n' | git commit -am x --edit`,
		`printf ':!rm x\n' | git commit --ed -m x`,
		`printf ':!rm x\n' | git commit -c HEAD`,
		`printf ':!rm x\n' | git commit -t tmpl`,
		`printf ':!rm x\n' | git commit --template -m`,
		`printf ':!rm x\n' | git commit --fixup=reword:HEAD`,
		`printf ':!rm x\n' | git -C . commit`,
		`printf ':!rm x\n' | git -c user.name=x commit`,
		`printf 'e\n:!rm x\n' | git add -p`,
		`printf ':!rm x\n' | git add -e`,
		`printf 'e\n' | git add -ip`,
		`printf ':!rm x\n' | git branch --edit-description`,
		`printf ':!rm x\n' | git rebase -i HEAD~2`,
		`printf ':!rm x\n' | git rebase --continue`,
		`printf ':!rm x\n' | git tag -a v1`,
		`printf ':!rm x\n' | git tag v1`,
		`printf ':!rm x\n' | git tag -e -m x v1`,
		`printf ':!rm x\n' | git merge main`,
		`printf ':!rm x\n' | git merge -e -m x main`,
		`printf ':!rm x\n' | git merge --continue`,
		`printf ':!rm x\n' | git revert HEAD`,
		`printf ':!rm x\n' | git cherry-pick -e HEAD`,
		`printf ':!rm x\n' | git notes add`,
		`printf ':!rm x\n' | git notes edit`,
		`printf ':!rm x\n' | git config --edit`,
		`printf ':!rm x\n' | git stash -p`,
		`printf ':!rm x\n' | git checkout -p`,
		`printf ':!rm x\n' | git difftool`,
		`printf ':!rm x\n' |& git commit`,
		`printf ':!rm x\n' | sudo git commit`,
		`printf ':!rm x\n' | timeout 5 git commit`,
		`echo x | cat | git commit`,
		`git commit <<< ':!rm x'`,
		"git commit <<EOF\n:!rm x\nEOF",
		`git commit < keys.txt`,
		`git commit 0< keys.txt`,
		`git commit < <(printf ':!rm x\n')`,
		`exec < keys.txt; git commit`,
		`printf ':!rm x\n' | { git commit; }`,
		`printf ':!rm x\n' | (git status && git commit)`,
		`printf ':!rm x\n' | crontab -e`,
		`printf ':!rm x\n' | visudo`,
		`printf ':!rm x\n' | sudo -e /etc/hosts`,
		`printf ':!rm x\n' | sudoedit /etc/hosts`,
		`printf ':!rm x\n' | systemctl edit x.service`,
		`printf ':!rm x\n' | kubectl edit deploy/x`,
		`printf ':!rm x\n' | svn commit`,
		`printf ':!rm x\n' | hg commit`,
		`printf ':!rm x\n' | git commit $X`,
		`f() { git commit; }; printf ':!rm x\n' | f`,
		`(f() { git commit; }; printf ':!rm x\n' | f) | cat`,
		`echo | (exec < keys.txt; git commit)`,
		`printf ':!rm x\n' | git ci`,
		`printf ':!rm x\n' | ssh prod git commit`,
		`printf ':!rm x\n' | ssh prod 'cd r && git commit'`,
		`coproc git commit; printf ':!rm x\n' >&"${COPROC[1]}"`,
		`printf ':!rm x\n' > >(git commit)`,
		`printf ':!rm x\n' | tee >(git commit)`,
		`printf ':!rm x\n' | git merge -m x main`,
		// Guards: an editor named by the environment is read as a command,
		// git's core.editor is opaque (so on f97895b4 too).
		`VISUAL="rm x" git commit`,
		`env GIT_EDITOR="rm x" git commit -m x`,
		`GIT_SEQUENCE_EDITOR="rm x" git rebase -i`,
		`git -c core.editor=x commit`,
	}
	fine := []string{
		`git commit -m "x"`,
		`git commit -F msg.txt`,
		`echo x | git commit -F -`,
		`echo x | git commit -m y`,
		`echo x | git commit -am y`,
		`echo x | git commit --no-edit --amend`,
		`echo x | git commit -C HEAD --amend`,
		`echo x | git commit --fixup=HEAD`,
		`printf 'x\n' | git commit --message=y`,
		`git commit < /dev/null`,
		`git commit --amend`,
		`git rebase -i HEAD~2`,
		`git add -p`,
		`echo x | git add a.go`,
		`git diff | git apply`,
		`echo x | git hash-object --stdin`,
		`echo x | git tag -a v1 -m x`,
		`echo x | git tag -l`,
		`echo x | git merge --no-edit main`,
		`echo x | git merge --ff-only main`,
		`echo x | git revert --no-edit HEAD`,
		`echo x | git cherry-pick HEAD`,
		`echo x | git rebase main`,
		`echo x | git notes list`,
		`echo x | git status`,
		`git commit -m x | cat`,
		`echo x | svn commit -m y`,
		`echo x | hg commit -m y`,
		`echo x | crontab -l`,
		`echo x | systemctl status x`,
		`echo x | ssh prod git commit -m y`,
	}
	checkCommands(t, []string{"printf *", "echo *", "cat *", "git *", "exec *", "sudo *", "timeout *", "crontab *",
		"visudo", "sudoedit *", "systemctl *", "kubectl *", "svn *", "hg *", "ssh prod git *", "ssh prod cd *"}, bypass, fine, bypass,
		[]string{`git commit -m "x"`, `git commit -F msg.txt`, `echo x | git commit -F -`, `echo x | git commit -m y`,
			`git commit --amend`, `git add -p`, `git diff | git apply`, `echo x | git tag -a v1 -m x`,
			`echo x | git merge --no-edit main`, `echo x | git rebase main`, `git commit -m x | cat`, `echo x | svn commit -m y`})
}

// TestCommandPolicy49bLinks (policy49b): the matcher judges a write by
// its name, so a link to a guarded path or outside the working directory
// let a later write land there under a harmless name: "ln -s .git/hooks h
// && cp evil h/pre-commit" (recipe49). Making such a link is read as a
// write to its target now. On f97895b4 a deny rule for "rm *" allowed
// each bypass and an allow rule for "ln *" and "cp *" allowed each.
func TestCommandPolicy49bLinks(t *testing.T) {
	bypass := []string{
		`ln -s .git/hooks h && cp evil h/pre-commit`,
		`ln -s .git/hooks h`,
		`ln -sf .git/hooks h`,
		`ln -s -- .git/hooks h`,
		`ln --symbolic .git/hooks h`,
		`ln -sr .git/hooks sub/h`,
		`ln -s ../.git/hooks sub/h`,
		`ln -s ../../x sub/h`,
		`ln -s .. up`,
		`ln -s ~ home`,
		`ln -s ~/.config c`,
		`ln -s /etc/profile.d p`,
		`ln -s /home/u/.ssh s`,
		`ln -s / root`,
		`ln -s .git g`,
		`ln .git/config c`,
		`ln /etc/passwd p`,
		`ln -t links .git/hooks`,
		`ln --target-directory=links .git/config`,
		`ln -s a .git/hooks x dir`,
		`sudo ln -s .git/hooks h`,
		`ln -s "$HOME" h`,
		`cp -s .git/config c && cp evil c`,
		`cp -s ../home/.bashrc rc && cp evil rc`,
		`cp -s .git/config c`,
		`cp -rs ~/.ssh s`,
		`cp --symbolic-link .git/config c`,
		`cp -l .git/config c`,
		`cp -al .git g`,
		`cp --link /etc/profile p`,
		`link .git/config c`,
		`link /etc/passwd p`,
		`mklink /D h 'C:\repo\.git\hooks'`,
		`mklink h '..\x'`,
		`mklink /H c '.git\config'`,
		// A stored target that climbs out with ".." leads outside the
		// working directory once the link is moved up (cmd50b).
		`ln -s ../lib vendor/lib`,
		`ln -s ../../include a/b/inc`,
		`ln -sr lib/x vendor/x`,
	}
	fine := []string{
		`ln -s lib/libx.so.1 libx.so`,
		`ln -sf build/out current`,
		`ln a.txt b.txt`,
		`cp -r src dst`,
		`cp a.txt b.txt`,
		`cp -a src dst`,
		`cp -s src/a.txt a.txt`,
		`cp -rl src dst`,
		`cp -L link copy`,
		`link a b`,
		`mklink /D h 'lib\x'`,
	}
	checkCommands(t, []string{"ln *", "cp *", "sudo *", "link *", "mklink *"}, bypass, fine, bypass, fine)
}

// TestCommandPolicy49bCtestNinja (policy49b): ctest --build-and-test runs
// the program after --test-command (recipe49: "… --test-command rm -rf
// ~" ran rm), a make program it is given, and its dashboard and script
// modes run commands and CMake code the matcher cannot read; ninja -t
// msvc runs the command after "--". Each is opaque now. On f97895b4 a
// deny rule for "rm *" allowed each bypass and an allow rule for "ctest
// *" and "ninja *" allowed each.
func TestCommandPolicy49bCtestNinja(t *testing.T) {
	bypass := []string{
		`ctest --build-and-test . build --build-generator Ninja --test-command rm -rf ~`,
		`ctest --build-and-test . build --build-generator Ninja --build-makeprogram ./x`,
		`ctest --build-and-test src out --build-generator 'Unix Makefiles'`,
		`ctest -S dash.cmake`,
		`ctest -SP dash.cmake`,
		`ctest -SR dash.cmake`,
		`ctest -Sdash.cmake`,
		`ctest -D Experimental`,
		`ctest -DExperimentalBuild`,
		`ctest -D CTEST_BUILD_COMMAND=./x -S s.cmake`,
		`ctest --dashboard Nightly`,
		`ctest -M Experimental -T Build`,
		`ctest -T Configure --source-dir . --build-dir build`,
		`ctest --test-action MemCheck`,
		`ctest --overwrite MakeCommand=./x -T Build`,
		`ctest --launch --target-name x --build-dir b -- rm -rf ~`,
		`ctest --test-dir build -O ~/.bashrc`,
		`ctest $OPTS`,
		`ninja -t msvc -- rm -rf ~`,
		`ninja -t msvc -e env.txt -- cl.exe x.c`,
		`ninja -tmsvc -- rm x`,
		`ninja -nt msvc -- rm x`,
		`ninja -C build -t msvc -- rm x`,
		`ninja-build -t msvc -- rm x`,
		`sudo ninja -t msvc -- rm x`,
		`ninja -t $T -- rm x`,
	}
	fine := []string{
		`ctest --test-dir build`,
		`ctest --test-dir build --output-on-failure`,
		`ctest -C Release -j4 -R unit -E slow`,
		`ctest -L fast -V`,
		`ctest --test-dir build -O build/test.log`,
		`ctest --rerun-failed --output-on-failure`,
		`ctest --build-config Release --test-dir build`,
		`ctest --build-config=Release -R unit`,
		`ninja -C build`,
		`ninja -C build -j8 all`,
		`ninja -t targets`,
		`ninja -t compdb > compile_commands.json`,
		`ninja -C build -t clean`,
		`ninja -k 0 test`,
	}
	checkCommands(t, []string{"ctest *", "ninja *", "ninja-build *", "sudo *"}, bypass, fine, bypass,
		[]string{`ctest --test-dir build`, `ctest -C Release -j4 -R unit -E slow`, `ninja -C build`, `ninja -t targets`, `ninja -k 0 test`})
}
