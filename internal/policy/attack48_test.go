package policy

import "testing"

// TestCommandAttack48Make (attack48): GNU make exports a command-line
// variable to every recipe's environment and a recipe runs a program
// variable's value ($(CC) -c a.c, $(RM) out). On 8bd1f455 each string
// below got past a deny rule for "rm *" and an allow rule for "make *":
// make CC=rm CFLAGS=-rf runs rm -rf -c a.c, make PYTHON=python3
// SCRIPT=x.py a python3 of the agent's choosing, make LD_PRELOAD=./x.so
// and make GIT_DIR=x what their prefix assignments would.
func TestCommandAttack48Make(t *testing.T) {
	allow := []string{"make *"}
	bypass := []string{
		`make CC=rm CFLAGS=-rf`,
		`make CC=/bin/rm CFLAGS=-rf`,
		`make 'CC =rm'`,
		`make CC:=rm`,
		`make RM=rm`,
		`make MAKE=rm`,
		`sudo make LD=rm`,
		`make CC=python3 CFLAGS=x.py`,
		`make X=python3 Y=x.py`,
		`make X=bash Y=x.sh`,
		`make LD_PRELOAD=./x.so`,
		`make BASH_ENV=./x.sh`,
		`make GIT_DIR=x`,
		`make NODE_OPTIONS=--require=./x.js test`,
	}
	held := append([]string{`make PATH=/tmp/x`, `make CC=gcc`}, bypass...)
	fine := []string{`make`, `make test`, `make PREFIX=/usr/local install`, `make V=1 -j4`, `make CFLAGS=-O2`, `make DESTDIR=out install`}
	// A value of any other variable is matched by deny rules as a
	// program (a makefile may run $(TOOL)), not by allow rules.
	checkCommands(t, allow, append(bypass, `make TOOL=rm`), fine, held, append(fine, `make TOOL=rm`))
}

// TestCommandAttack48Writers (attack48): positional writers that
// branch policy48 read missed a long option's value (uniq --skip-fields
// 1 IN OUT read 1 as IN and IN as OUT), and archives and compressed
// files write outside what it read: tar -P keeps an entry's absolute
// name (/home/u/.bashrc), --one-top-level=DIR and --transform move it,
// unzip -: keeps ../ in names, and gunzip F.gz writes F. On 8bd1f455 a
// deny rule for "rm *" and an allow rule for each program allowed them.
func TestCommandAttack48Writers(t *testing.T) {
	allow := []string{"uniq *", "xxd *", "tar *", "unzip *", "gunzip *", "gzip *", "xz *", "zstd *", "bunzip2 *"}
	bypass := []string{
		`uniq --skip-fields 1 x ~/.bashrc`,
		`uniq --skip-chars 1 x .git/hooks/pre-commit`,
		`uniq --check-chars 1 x Makefile`,
		`xxd -r --seek 0 x ~/.bashrc`,
		`tar -xPf a.tar`,
		`tar xPf a.tar`,
		`tar --absolute-names -xf a.tar`,
		`tar -xf a.tar --one-top-level=/home/u`,
		`tar -xf a.tar --transform 's,^,.git/hooks/,'`,
		`bsdtar -xf a.tar -s ',^,../../,'`,
		`unzip -: a.zip`,
		`gunzip ~/.bashrc.gz`,
		`gzip -d .git/hooks/pre-commit.gz`,
		`gzip --decompress Makefile.gz`,
		`xz -d Makefile.xz`,
		`zstd -d -f Makefile.zst`,
		`bunzip2 .git/hooks/post-checkout.bz2`,
		`gunzip -S .x ~/.bashrc.x`,
	}
	fine := []string{`uniq -c a b`, `uniq --skip-fields 1 a b`, `tar -xzf a.tar.gz -C out`, `tar -cf a.tar src`, `tar xf a.tar`,
		`unzip a.zip -d out`, `gunzip a.gz`, `gzip -dc .git/hooks/pre-commit.gz`, `gzip ~/.bashrc`, `xz -d a.xz`, `zstd -d a.zst`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}
