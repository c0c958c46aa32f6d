package policy

import "testing"

// TestCommandReview48bRunners (review48b): the runners branch attack48
// read let these through. screen -l is login mode, not -ls, and runs its
// command; tmux's -L, -S and -f take a value (tmux -L ls new … is not
// tmux ls), a ";" starts a second command and a format's #(…) runs one;
// entr -s and env-cmd --use-shell run a shell command line; env-cmd -f
// and dotenv -e read the environment from a file (env-cmd -e ENV from
// .env-cmdrc, now guarded); socat 1.8's SHELL:
// address runs a command and OPEN:/CREATE:/GOPEN: (or a bare path)
// writes a file. On 70591636 a deny rule for "rm *" and an allow rule for
// the program allowed each.
func TestCommandReview48bRunners(t *testing.T) {
	bypass := []string{`screen -l rm x`, `screen -dmS s -l rm x`, `screen -ls -X stuff x`,
		`tmux -L ls new 'rm x'`, `tmux -S ls new 'rm x'`, `tmux -f ls new 'rm x'`, `tmux -c 'rm x'`, `tmux ls \; new 'rm x'`,
		`tmux ls ';' new 'rm x'`, `tmux 'ls;' new 'rm x'`, `tmux ls -F '#(rm x)'`,
		`entr -s 'rm x'`, `entr -ps 'rm x'`, `env-cmd --use-shell 'rm x'`, `env-cmd -f x.env git status`, `dotenv -e x.env -- git status`,
		`tee .env-cmdrc`, `cp x .env-cmdrc.json`,
		`socat - SHELL:'rm x'`, `socat - shell:'rm x'`, `socat - OPEN:.git/hooks/pre-commit,creat`, `socat - CREATE:Makefile`,
		`socat TCP-L:1 ./.git/hooks/pre-commit`, `socat - 'TCP:h:1!!GOPEN:~/.bashrc'`}
	fine := []string{`screen -ls`, `screen -list`, `tmux ls`, `tmux -L work ls`, `tmux kill-session -t x`, `tmux -u list-windows -F '#{window_name}'`,
		`entr -c make`, `env-cmd make`, `dotenv -- make`, `socat - TCP:h:1`, `socat - OPEN:out.txt,creat`, `socat - ./out.txt`}
	checkCommands(t, []string{"screen *", "tmux *", "entr *", "env-cmd *", "dotenv *", "socat *", "make *", "tee *", "cp *"}, bypass, fine, bypass, fine)
}

// TestCommandReview48bMakeShell (review48b): GNU make on Windows takes
// its recipes' shell from MAKESHELL before SHELL; on 70591636 an allow
// rule for "make *" allowed make MAKESHELL=./evil.exe.
func TestCommandReview48bMakeShell(t *testing.T) {
	checkCommands(t, []string{"make *"}, []string{`make MAKESHELL=rm`}, []string{`make PREFIX=/usr`},
		[]string{`make MAKESHELL=./evil.exe`, `make MAKESHELL=C:/x/sh.exe all`}, []string{`make PREFIX=/usr`})
}

// TestCommandReview48bPatchBackups (review48b): patch -B PREFIX (and -Y,
// --prefix, --basename-prefix) keeps each patched file's old text as
// PREFIX+name, as cp -S does with a suffix (branch attack48 read cp's).
// On 70591636 a deny rule for "rm *" and an allow rule for "patch *"
// allowed each.
func TestCommandReview48bPatchBackups(t *testing.T) {
	bypass := []string{`patch -b -B .git/hooks/ -p0 -i d.diff`, `patch -bB.git/hooks/ -i d.diff`, `patch -b --prefix=~/.bash -i d.diff`,
		`patch -b -Y .husky/ -i d.diff`, `patch -b --basename-prefix .git/hooks/ -i d.diff`}
	fine := []string{`patch -b -B backup/ -p1 -i d.diff`, `patch -p1 -i d.diff`, `patch -b -z .orig -p1 -i d.diff`}
	checkCommands(t, []string{"patch *"}, bypass, fine, bypass, fine)
}

// TestCommandReview48bArchiveNames (review48b): GNU cpio -i extracts an
// entry's absolute name as it is unless --no-absolute-filenames, pax -r
// too, and pax -s rewrites the names, as tar -P and --transform do
// (branch attack48 read tar's). On 70591636 a deny rule for "rm *" and an
// allow rule for the program allowed each.
func TestCommandReview48bArchiveNames(t *testing.T) {
	bypass := []string{`cpio -id < a.cpio`, `cpio --extract < a.cpio`, `pax -r -f a.pax`, `pax -r < a.pax`,
		`pax -rw -s ',^,.git/hooks/,' src out`}
	fine := []string{`cpio -id --no-absolute-filenames -F a.cpio`, `cpio -pdm out`, `pax -w -f a.pax src`, `pax -rw src out`}
	// Allow rules hold a redirection of their own (< a.cpio): deny only.
	checkCommands(t, []string{"cpio *", "pax *"}, bypass, append(fine, `cpio -id --no-absolute-filenames < a.cpio`), bypass, fine)
}

// TestCommandReview48bSearchDirs (review48b): more directories on a
// usual PATH than branch attack48 listed: Ubuntu's /usr/games,
// /usr/local/games and /snap/bin (after /usr/bin: a name not there runs
// from them), and yarn's, nix's, dotnet tools', pnpm's and pixi's bin
// directories. On 70591636 an allow rule for "cp *" allowed each.
func TestCommandReview48bSearchDirs(t *testing.T) {
	bypass := []string{`cp evil /snap/bin/kubectl`, `cp evil /usr/games/git`, `cp evil ~/.yarn/bin/tsc`, `cp evil ~/.nix-profile/bin/git`,
		`cp evil ~/.dotnet/tools/dotnet-ef`, `cp evil ~/.local/share/pnpm/tsc`, `cp evil ~/Library/pnpm/tsc`, `cp evil ~/.pixi/bin/python`}
	fine := []string{`cp x snap/bin.txt`, `cp x games/`, `cp x yarn/bin/x`}
	checkCommands(t, []string{"cp *"}, bypass, fine, bypass, fine)
}
