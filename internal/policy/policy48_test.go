package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

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
	// make CC=clang runs clang: since branch attack48 an allow rule must
	// match it too ("clang *").
	fine := []string{`make`, `make test`, `make -j4 PREFIX=/usr/local install`, `make V=1 DESTDIR=build/out`,
		`make CFLAGS=-O2`, `make GOFLAGS=-mod=mod test`, `make VERSION=1.2.3+dev`}
	checkCommands(t, []string{"make *", "gmake *", "sudo make *", "clang *"}, bypass, append(fine, `make CC=clang`), bypass,
		append(fine, `make CC=clang`))
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

// TestCommandPolicy48ToolSettings (policy48): cargo, uv, poetry and
// Bundler settings that name a program, code or a file of settings make a
// plain-looking call run what the matcher never sees, as npm's
// script-shell does (policy47): cargo --config
// 'build.rustc-wrapper="./x.sh"', RUSTC_WRAPPER=…, a target's runner, -Z
// flags, RUSTFLAGS='-C linker=./x'; uv --python ./x, --env-file
// (LD_PRELOAD=…), --config-file, uv run - (a script from the input);
// poetry config virtualenvs.path, poetry source add; bundle config set
// gemfile/shebang, BUNDLE_GEMFILE, bundle exec CMD (a runner). On
// 78ecb273 a deny rule for "rm *" allowed each (but uv run -, which a
// runner without a program already made opaque, kept as a guard) and an
// allow rule for the tool allowed each without an assignment.
func TestCommandPolicy48ToolSettings(t *testing.T) {
	tests := []struct {
		program string
		allow   []string
		bypass  []string
		fine    []string
	}{
		{"cargo", []string{"cargo *"},
			[]string{
				`cargo --config 'build.rustc-wrapper="./x.sh"' build`,
				`cargo build --config=target.x86_64-unknown-linux-gnu.runner='rm -rf'`,
				`cargo --config evil.toml test`,
				`cargo --config 'alias.b="run --bin x"' b`,
				`cargo --config 'env.LD_PRELOAD="./x.so"' test`,
				`cargo --config '"build".rustc="./x"' build`,
				`cargo -Z config-include build`,
				`cargo -Zhost-config build`,
				`RUSTC_WRAPPER='rm -rf /' cargo build`,
				`CARGO_BUILD_RUSTC_WRAPPER='rm x' cargo build`,
				`CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER='rm x' cargo run`,
				`RUSTFLAGS='-C linker=./x.sh' cargo build`,
				`RUSTFLAGS='-Clink-arg=-fuse-ld=./x' cargo build`,
				`CARGO_ALIAS_B='run --bin x' cargo b`,
				`env RUSTC='rm x' cargo build`,
			},
			[]string{`cargo build`, `cargo test --release`, `cargo --config build.jobs=4 build`, `cargo build --config 'profile.dev.opt-level=1'`,
				`cargo -Z unstable-options build`, `CARGO_TERM_COLOR=always cargo test`, `CARGO_TARGET_DIR=/tmp/t cargo build`,
				`RUSTFLAGS='-D warnings -C target-cpu=native' cargo build`, `cargo run -- --config x`}},
		{"uv", []string{"uv *", "uvx *", "pytest *", "ruff *", "mypy *"},
			[]string{
				`uv run --python ./x.sh pytest`,
				`uv run -p ./x pytest`,
				`uv --python=/tmp/x pip install a`,
				`uv pip install -p ./venv/bin/x a`,
				`uv run --env-file x.env pytest`,
				`uv run --config-file x.toml pytest`,
				`uv run --with a --python ./x pytest`,
				`uv run -`,
				`uv tool run -`,
				`uvx --python ./x ruff`,
				`UV_PYTHON=./x uv run pytest`,
				`UV_ENV_FILE=x.env uv run pytest`,
				`UV_CONFIG_FILE=x.toml uv sync`,
				`echo '[pip]' > uv.toml`,
			},
			[]string{`uv sync`, `uv run pytest`, `uv run --python 3.12 pytest`, `uv run -p 3.12 pytest -x`, `uvx ruff check .`,
				`uv pip install -r requirements.txt`, `uv run mypy --config-file mypy.ini .`, `UV_PYTHON=3.12 uv sync`,
				`uv tool run ruff check`, `uv run --with a pytest`, `uv run -m pytest`}},
		{"poetry", []string{"poetry *", "pytest *"},
			[]string{
				`poetry config virtualenvs.path ./evil`,
				`poetry config --local repositories.x https://evil/simple`,
				`poetry config cache-dir ./x`,
				`poetry source add x https://evil/simple`,
				`poetry self add ./x-plugin`,
				`echo '[virtualenvs]' > poetry.toml`,
			},
			[]string{`poetry install`, `poetry run pytest`, `poetry config --list`, `poetry config virtualenvs.path`,
				`poetry config virtualenvs.in-project true`, `poetry config --unset virtualenvs.path`,
				`poetry config http-basic.x user pass`, `POETRY_VIRTUALENVS_IN_PROJECT=true poetry install`}},
		{"bundle", []string{"bundle *", "rspec *", "rake *"},
			[]string{
				`bundle config set gemfile ./x.rb`,
				`bundle config set --local shebang ./x.sh`,
				`bundle config gemfile ./x.rb`,
				`bundle config set local.rack ./evil`,
				`bundle config mirror.https://rubygems.org https://evil`,
				`bundle install --gemfile=x.rb`,
				`BUNDLE_GEMFILE=x.rb bundle exec rspec`,
				`bundle exec rm -rf /`,
				`bundle exec 'rm x'`,
				`bundler exec rm x`,
				`echo 'BUNDLE_GEMFILE: x.rb' > .bundle/config`,
			},
			[]string{`bundle install`, `bundle exec rspec`, `bundle exec rake test`, `bundle config list`, `bundle config get path`,
				`bundle config set --local jobs 4`, `bundle config set without development`, `bundle config --delete gemfile`,
				`BUNDLE_JOBS=4 bundle install`, `bundle config gemfile`}},
	}
	for _, tc := range tests {
		t.Run(tc.program, func(t *testing.T) {
			// An allow rule refuses every assignment already; the
			// assignments' bypasses are checked against the deny rule.
			var allowed []string
			for _, c := range tc.fine {
				if !strings.Contains(strings.Fields(c)[0], "=") {
					allowed = append(allowed, c)
				}
			}
			checkCommands(t, tc.allow, tc.bypass, tc.fine, tc.bypass, allowed)
		})
	}
}

// TestCommandPolicy48PositionalWriters (policy48): writers whose
// destination is an operand or a directory, not an output option, wrote a
// file a program runs as code unseen: uniq IN OUT, xxd (-r) IN OUT,
// split's prefix (split -a1 -l1 x ~/.bashr writes ~/.bashrc), csplit's,
// unzip -d DIR and tar -x -C DIR into a home or .git directory, gcc's
// dependency file (-MF, -Wp,-MD,FILE) and the linker's map (-Wl,-Map=).
// On 78ecb273 a deny rule for "rm *" allowed each and an allow rule for
// the writer allowed each.
func TestCommandPolicy48PositionalWriters(t *testing.T) {
	allow := []string{"uniq *", "xxd *", "split *", "csplit *", "unzip *", "tar *", "gcc *", "cc *", "clang *"}
	bypass := []string{
		`uniq x ~/.bashrc`,
		`uniq -f 1 x .git/hooks/pre-commit`,
		`uniq -- x Makefile`,
		`xxd -r x.hex .git/hooks/pre-commit`,
		`xxd -r -p x.hex ~/.bashrc`,
		`xxd -c 16 x .bashrc`,
		`split -a1 -l1 x ~/.bashr`,
		`split -l 1 x .git/hooks/pre-`,
		`split -l 1 x .git/hooks/`,
		`split -l1 --additional-suffix=.mk x rules`,
		`split -n 2 x Makefil`,
		`csplit -f ~/.bashr x 2`,
		`csplit -b '%d.mk' x 2`,
		`unzip x.zip -d ~`,
		`unzip -o x.zip -d .git/hooks`,
		`unzip -qd ~/.ssh x.zip`,
		`tar -xf x.tar -C ~`,
		`tar -C .git -xzf x.tgz`,
		`tar xfC x.tar .git`,
		`tar --extract --file=x.tar --directory=/root`,
		`tar -xf x.tar --directory ~/.config`,
		`tar -C / -xf x.tar`,
		`unzip x.zip -d /home`,
		`gcc -MD -MF .git/hooks/pre-commit -c a.c`,
		`gcc -M -MF Makefile a.c`,
		`gcc -Wp,-MD,.git/hooks/post-checkout -c a.c`,
		`cc -Wl,-Map=.bashrc a.o`,
		`clang -MF~/.bashrc -M a.c`,
	}
	fine := []string{`uniq x`, `uniq x out.txt`, `split -l 1000 big.csv out/`, `split -l 1 x ~/`, `uniq -c x y`, `xxd x`, `xxd -r x.hex out.bin`, `split -l 1000 big.csv part-`,
		`split big.csv`, `csplit x 2`, `unzip x.zip`, `unzip x.zip -d out`, `tar -xf x.tar -C build`, `tar -cf x.tar -C ~ notes`,
		`tar -xzf x.tgz`, `gcc -MD -MF build/a.d -c a.c`, `gcc -Wp,-MD,build/.a.o.d -c a.c`, `cc -Wl,-Map=out.map a.o`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}

// TestCommandPolicy48ProgramChoosers (policy48): a write into
// node_modules (npm test, npx X and ./node_modules/.bin/X run what is
// there), to .tool-versions or mise's files (a path: version, tasks and
// hooks) or to rustup's rust-toolchain(.toml) (path = …) makes a later
// plain call run a program the matcher never sees. On 78ecb273 a deny
// rule for "rm *" allowed each and an allow rule for the writer allowed
// each.
func TestCommandPolicy48ProgramChoosers(t *testing.T) {
	allow := []string{"echo *", "cp *", "ln *", "tee *"}
	bypass := []string{
		`cp x.sh node_modules/.bin/eslint`,
		`ln -sf /bin/sh ./node_modules/.bin/jest`,
		`echo 'rm -rf ~' > node_modules/.bin/tsc`,
		`cp x.js node_modules/eslint/bin/eslint.js`,
		`echo 'nodejs path:/tmp/x' > .tool-versions`,
		`echo '[tasks.test]' >> .mise.toml`,
		`echo '[hooks]' | tee mise.toml`,
		`cp x.toml ~/.config/mise/config.toml`,
		`echo '[toolchain]' > rust-toolchain.toml`,
		`echo x > rust-toolchain`,
	}
	fine := []string{`cp x.sh bin/eslint`, `cp x notes.txt`, `tee tools.txt`, `cp node_modules/x/a.js vendor/`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}

// TestCommandPolicy48EnvArguments (policy48): the tools' variables in a
// call's environment argument. A setting that names a program or a file
// of settings (RUSTC_WRAPPER, BUNDLE_GEMFILE, UV_CONFIG_FILE) is read as
// in the command; a tool's home or environments' directory (CARGO_HOME,
// BUNDLE_PATH, POETRY_HOME), often in a whole environment (Docker's rust,
// ruby and poetry images), is refused by allow rules as PATH is, and a
// deny rule does not match it; harmless settings are fine. On 78ecb273 the
// first three were allowed by both rules.
func TestCommandPolicy48EnvArguments(t *testing.T) {
	deny := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	allow := mustCompile(t, newPolicy(Approve, commandRule("tools", Allow, "cargo *", "bundle *", "uv *", "ls *")))
	for _, tc := range []struct {
		command   string
		env       map[string]any
		denied    bool // by the deny rule for rm *
		allowedBy bool // by the allow rule
	}{
		{"cargo build", map[string]any{"RUSTC_WRAPPER": "rm -rf /"}, true, false},
		{"bundle exec rspec", map[string]any{"BUNDLE_GEMFILE": "x.rb"}, true, false},
		{"uv sync", map[string]any{"UV_CONFIG_FILE": "x.toml"}, true, false},
		{"cargo build", map[string]any{"CARGO_HOME": "./evil"}, false, false},
		{"ls", map[string]any{"CARGO_HOME": "/usr/local/cargo", "RUSTUP_HOME": "/usr/local/rustup", "BUNDLE_PATH": "/usr/local/bundle",
			"BUNDLE_APP_CONFIG": "/usr/local/bundle", "POETRY_HOME": "/opt/poetry", "POETRY_NO_INTERACTION": "1"}, false, false},
		{"cargo build", map[string]any{"CARGO_TERM_COLOR": "always", "BUNDLE_JOBS": "4", "POETRY_VIRTUALENVS_IN_PROJECT": "true",
			"UV_PYTHON": "3.12"}, false, true},
	} {
		raw, err := json.Marshal(map[string]any{"command": tc.command, "env": tc.env})
		if err != nil {
			t.Fatal(err)
		}
		c := Call{Server: "shell", Tool: "run", Arguments: raw, Principal: Principal{ID: "agent-1"}}
		if d := eval(t, deny, c); (d.Effect == Deny) != tc.denied {
			t.Errorf("%q with %v: %s under a deny rule for rm *, want denied %v", tc.command, tc.env, d.Effect, tc.denied)
		}
		if d := eval(t, allow, c); (d.Effect == Allow) != tc.allowedBy {
			t.Errorf("%q with %v: %s under an allow rule, want allowed %v", tc.command, tc.env, d.Effect, tc.allowedBy)
		}
	}
}

// TestCommandPolicy48GitDirOptionValues (review48): what turns bare
// discovery off for git -C DIR is the options git reads, not any word
// that looks like one: a word another option takes as its value
// (--namespace --git-dir, -C -csafe.bareRepository=explicit, a directory
// of that name) names no git directory and sets nothing, and a later
// -c safe.bareRepository=all (git's last setting wins) or --config-env
// undoes an earlier =explicit. On e7e10cfd a deny rule for "rm *" and an
// allow rule for "git *" allowed each bypass.
func TestCommandPolicy48GitDirOptionValues(t *testing.T) {
	bypass := []string{
		`git --namespace --git-dir -C x log`,
		`git --namespace=n --shallow-file --git-dir=.git -C x log`,
		`git --namespace -csafe.bareRepository=explicit -C x log`,
		`git --attr-source -c -C x safe.bareRepository=explicit`,
		`git -C -csafe.bareRepository=explicit log`,
		`git -C --git-dir log`,
		`git -C --git-dir=.git log`,
		`git -c safe.bareRepository=explicit -c safe.bareRepository=all -C x log`,
		`git -c safe.bareRepository=explicit --config-env=safe.bareRepository=V -C x log`,
		`git -c safe.bareRepository=explicit --config-env safe.bareRepository=V -C x log`,
	}
	fine := []string{`git -c safe.bareRepository=all -c safe.bareRepository=explicit -C x log`,
		`git -csafe.bareRepository=explicit -C x log`, `git --namespace n -c safe.bareRepository=explicit -C x log`,
		`git --git-dir .git -C x log`}
	checkCommands(t, []string{"git *"}, bypass, fine, bypass, fine)
}

// TestCommandPolicy48ArchivePathsAnywhere (review48): tar -P
// (--absolute-names) keeps an entry's leading / (and its ..), tar
// --one-top-level=DIR unpacks into DIR as -C DIR does, and unzip
// -: keeps its ../, so the archive's entries land anywhere (/root/.bashrc,
// ../../home/u/.bashrc) whatever the directory it unpacks in: read as
// unpacking into /, as tar -x -C / is. On e7e10cfd a deny rule for
// "rm *" and an allow rule for the unpacker allowed each.
func TestCommandPolicy48ArchivePathsAnywhere(t *testing.T) {
	allow := []string{"tar *", "unzip *"}
	bypass := []string{
		`tar -xPf x.tar`,
		`tar xPf x.tar`,
		`tar -x -P -f x.tar`,
		`tar --extract --absolute-names --file=x.tar`,
		`tar -xf x.tar --absolute-names -C build`,
		`tar -xf x.tar --one-top-level=/root`,
		`tar -xf x.tar --one-top=.git/hooks`,
		`unzip -: x.zip`,
		`unzip -o: x.zip -d build`,
		`unzip x.zip -:`,
	}
	// attack48's tarAbsolute reads any -P, --one-top-level or --transform as
	// writing anywhere (create included): `tar -xf x.tar --one-top-level=build`
	// and `tar -cPf x.tar /etc/hosts` are accepted wrong refusals (docs/policy.md).
	fine := []string{`tar -xf x.tar`, `tar -xfP x.tar`, `unzip x.zip -d build`, `unzip -o x.zip`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}

// TestCommandPolicy48UniqLongOptions (review48): uniq's long options
// that take a value take the next word too (--skip-fields 1, and their
// abbreviations), so OUT is the operand after IN past that value. On
// e7e10cfd the value was read as IN and IN as OUT: a deny rule for
// "rm *" and an allow rule for "uniq *" allowed each bypass.
func TestCommandPolicy48UniqLongOptions(t *testing.T) {
	bypass := []string{
		`uniq --skip-fields 1 x ~/.bashrc`,
		`uniq --skip-chars 2 x .git/hooks/pre-commit`,
		`uniq --check-chars 2 x Makefile`,
		`uniq --skip-f 1 x ~/.bashrc`,
		`uniq -c --skip-fields=1 x Makefile`,
	}
	fine := []string{`uniq --skip-fields 1 x out.txt`, `uniq --skip-fields=1 Makefile out.txt`, `uniq --count Makefile out.txt`}
	checkCommands(t, []string{"uniq *"}, bypass, fine, bypass, fine)
}

// TestCommandPolicy48SplitFilter (review48): split --filter=COMMAND runs
// COMMAND with the shell for each piece, and split's valued long options
// are read abbreviated too (--by 1 is --bytes 1), so the prefix is the
// operand after the input past that value. On e7e10cfd a deny rule for
// "rm *" and an allow rule for "split *" allowed each bypass.
func TestCommandPolicy48SplitFilter(t *testing.T) {
	bypass := []string{
		`split --filter='rm x' y`,
		`split --filter 'rm x' y`,
		`split --fil 'rm x' y`,
		`split -l 1 --filter='cat > $FILE' y`,
		`split --by 1 x ~/.bashr`,
		`split "$f"`,
	}
	fine := []string{`split -l 1000 big.csv part-`, `split --bytes 1M big.bin out/`, `split --lines=10 x`, `split -- --filter`}
	checkCommands(t, []string{"split *"}, bypass, fine, bypass, fine)
}
