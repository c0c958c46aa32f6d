package policy

import "testing"

// TestCommandPolicy48Make (policy48): a make command-line variable
// overrides the makefile's, and a recipe using it runs its value as shell
// text, so make CC='rm x' runs rm for $(CC) -c a.c. A value that is not
// one plain word is opaque now; on 78ecb273 a deny rule for "rm *"
// allowed each and an allow rule for "make *" allowed each.
func TestCommandPolicy48Make(t *testing.T) {
	bypass := []string{
		`make CC='rm -rf /'`,
		`make 'CC=rm x;'`,
		`make RM='rm -rf ~' clean`,
		`make -j4 CFLAGS='-O2 -g' all`,
		`make 'CC:=sh -c x'`,
		`make 'override CC=rm x'`,
		"make 'CC=rm`x`'",
		`make CC='/bin/r?'`,
		`gmake 'LD=x|y'`,
	}
	fine := []string{`make`, `make test`, `make CC=clang`, `make -j4 PREFIX=/usr/local install`, `make V=1 DESTDIR=build/out`,
		`make CFLAGS=-O2`, `make GOFLAGS=-mod=mod test`, `make VERSION=1.2.3+dev`}
	checkCommands(t, []string{"make *", "gmake *", "sudo make *"}, bypass, fine, bypass, fine)
}

// TestCommandPolicy48GitDir (policy48): git -C DIR discovers the
// repository from DIR, and a directory that looks like a bare repository
// (HEAD, objects/, refs/) is one, its DIR/config read: an alias or
// core.pager planted there by a plain file write or a checked-out tree
// ran (git 2.39: "git init --bare x; git -C x zz" ran x/config's alias).
// -C is opaque unless DIR is "." or a .git directory, --git-dir names a
// .git directory, or -c safe.bareRepository=explicit turns bare
// discovery off. On 78ecb273 a deny rule for "rm *" allowed each bypass
// but --git-dir=x, GIT_DIR=x and --bare (opaque since policy47/attack47,
// kept here as guards).
func TestCommandPolicy48GitDir(t *testing.T) {
	bypass := []string{
		`git -C x zz`,
		`git -C vendor/evil log -1`,
		`git -C a -C b status`,
		`git -C x -c user.name=y log`,
		`git -c safe.bareRepository=all -C x log`,
		`git -C x`,
		`git --git-dir=x log`,
		`GIT_DIR=x git log`,
		`git --bare log`,
	}
	fine := []string{`git log`, `git -C . status`, `git -C .git log`, `git -C ../r/.git log`,
		`git -c safe.bareRepository=explicit -C x log`, `git -C x -c safe.barerepository=explicit status`,
		`git --git-dir=x/.git -C x log`, `git -C .`}
	checkCommands(t, []string{"git *"}, bypass, fine, bypass, fine)
}
