package policy

import "testing"

// TestCommandPolicy49FindExec (policy49): the command find's -exec,
// -execdir, -ok and -okdir run, and xargs's, is checked as a command of
// its own with {} (and xargs's input) read as any path. On 0939e27a find
// was read only through the suffixes of its words, where ';' is cp's
// destination: find -exec cp {} Makefile ';' was refused only because two
// sources made cp's destination ";" a directory (";/Makefile"), while
// .git/hooks/pre-commit, a found path ({}) and -execdir's relative paths
// were missed; a deny rule for "rm *" and an allow rule for "find *",
// "cp *" allowed each bypass but cp -t .git/hooks (kept as a guard).
func TestCommandPolicy49FindExec(t *testing.T) {
	bypass := []string{
		`find . -name x -exec cp {} .git/hooks/pre-commit ';'`,
		`find . -name x -exec cp {} .git/config ';'`,
		`find . -name x -exec cp {} .husky/pre-commit ';'`,
		`find . -name x -exec cp {} ~/.local/bin/git ';'`,
		`find . -name x -exec cp {} .GIT/hooks/pre-commit ';'`,
		`find . -name x -execdir cp {} .git/hooks/pre-commit ';'`,
		`find . -name x -ok cp {} .git/hooks/pre-commit ';'`,
		`find . -name x -exec cp -t .git/hooks {} +`,
		`find .git/hooks -exec cp x {} ';'`,
		`find . -name pre-commit -exec cp x {} ';'`,
		`find .git -type d -exec cp x {}/pre-commit ';'`,
		`find . -name hooks -okdir cp x pre-commit ';'`,
		`find . -name hooks -execdir cp x hooks/pre-commit ';'`,
		`find . -name x -exec tar -cf {} src ';'`,
		// A write to a found path is opaque whatever find's tests say,
		// grep -r searches .git too (policy45b held it as an everyday
		// call); since cmd50b -name '*.go' is read (TestCommandCmd50bFindNames).
		`find . -name '*' -exec sed -i 's/a/b/' {} +`,
		`grep -rl x . | xargs sed -i 's/a/b/g'`,
		`sudo find .git -exec cp x {} ';'`,
		`find . -exec find {} -exec cp x {} ';' ';'`,
		`echo .git/hooks/pre-commit | xargs cp x`,
		`echo .git/hooks/pre-commit | xargs -I{} cp x {}`,
		`echo .git/hooks/pre-commit | xargs -I Q cp x Q`,
		`echo .git/hooks/pre-commit | xargs --replace=F cp x F`,
		`echo .git/hooks/pre-commit | xargs -0 -n1 cp x`,
	}
	fine := []string{
		`find . -name '*.go' -exec gofmt -l {} +`,
		`find . -name '*.go' -exec grep -n foo {} +`,
		`find . -name '*.orig' -exec cp {} /tmp/backup/ ';'`,
		`find . -name '*.log' -exec cp -t /tmp/logs {} +`,
		`find . -type d -execdir ls ';'`,
		`find . -name x -fprint /tmp/list`,
		`find . -name '*.go' | xargs grep -l foo`,
		`find . -name '*.go' -print0 | xargs -0 gofmt -l`,
		`find . -name '*.txt' | xargs -I{} cp {} /tmp/out/`,
	}
	checkCommands(t, []string{"find *", "cp *", "tar *", "sed *", "sudo find *", "gofmt *", "grep *", "ls *", "xargs *", "echo *"},
		bypass, fine, bypass, fine)
}
