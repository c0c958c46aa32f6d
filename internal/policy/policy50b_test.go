package policy

import (
	"strings"
	"testing"
)

// TestCommandCmd50bLinkCopies (cmd50b): a link arrives by a move or a
// copy that keeps links as well as by ln. Moving (mv) or copying with
// links kept (cp -a, -P, -d, -r; rsync -l, -a) something outside the
// working directory or a guarded path is read as making a link there
// (cp -a /etc/x . copies a link /etc/x -> /etc/profile.d as one), and
// a symbolic link whose stored target climbs out with ".." is refused
// when made (ln -s ../../.. d/e/f/h && mv d/e/f/h h leads three levels
// above the tree, where h/usr/local/bin/git is a name no guard reads).
// On 3eefbceb a deny rule for "rm *" and an allow rule for "mv *",
// "cp *", "rsync *" and "ln *" allowed each bypass.
func TestCommandCmd50bLinkCopies(t *testing.T) {
	bypass := []string{
		`mv /tmp/x .`,
		`mv ~/.ssh/id_rsa .`,
		`mv ../x .`,
		`mv -t dir /tmp/x`,
		`mv --target-directory=dir ~/x`,
		`gmv /srv/x .`,
		`sudo mv /tmp/x .`,
		`mv .git/hooks h`,
		`cp -a /etc/x .`,
		`cp -P /etc/x y`,
		`cp -d ~/x y`,
		`cp -r ~/.ssh keys`,
		`cp -R /srv/tree t`,
		`cp --archive /etc/x .`,
		`cp --no-dereference ../x y`,
		`cp -aL /etc/x .`,
		`cp -a .git g`,
		`cp -a .husky h`,
		`rsync -a ~/.ssh/ keys/`,
		`rsync -l /etc/x y`,
		`rsync --links /etc/x y`,
		`rsync -av host:dir/ .`,
		`rsync -a rsync://host/mod/ .`,
		`rsync -a --exclude x /srv/x/ y/`,
		`rsync -a --link-dest=/etc src/ dst/`,
		`rsync -r --link-dest /etc src/ dst/`,
		`ln -s ../../.. d/e/f/h && mv d/e/f/h h`,
		`ln -s ../lib vendor/lib`,
		`ln -s .. up/x`,
		`ln -sr lib vendor/lib`,
		`ln -sr lib -t vendor`,
		`cp -s ../a sub/b`,
		// ln -r stores the target relative to where the link lands, and
		// the name may be a directory (vendor/y/x -> ../lib/x).
		`ln -sr vendor/lib/x vendor/y`,
	}
	fine := []string{
		`mv a b`,
		`mv src/a.go src/b.go`,
		`mv h x`,
		`mv build/out.txt /tmp/out.txt`,
		`cp -a src dst`,
		`cp -P h x`,
		`cp -d h x`,
		`cp -r dist /tmp/backup`,
		`cp /etc/passwd .`,
		`cp -L /etc/x .`,
		`cp -rL ~/skel x`,
		`cp -p /tmp/x y`,
		`rsync -l h x`,
		`rsync -a src/ dst/`,
		`rsync -a src/ host:dst/`,
		`rsync -aL ~/x/ y/`,
		`rsync -a --safe-links /srv/x/ y/`,
		`rsync -a --copy-unsafe-links /srv/x/ y/`,
		`rsync -r /srv/x/ y/`,
		`rsync -a --exclude=node_modules src/ dst/`,
		`install -D /etc/x y`,
		`install -D x y`,
		`ln -s lib/x vendor/y`,
		`ln -s x .`,
		`tar -xf a.tar`,
	}
	checkCommands(t, []string{"mv *", "gmv *", "cp *", "rsync *", "ln *", "install *", "tar *", "sudo *"}, bypass, fine, bypass, fine)
}

// TestCommandCmd50bFindNames (cmd50b): a found path is read as a guarded
// one unless find's filters say what it is. A plain conjunction before
// the action holding -name or -iname '*.EXT' of a source file's
// extension no guarded name has, over start points inside the tree that
// are not guarded, makes each found path START/x.EXT (and a directory of
// that name); find … -print0 | xargs -0 likewise. docker's and podman's
// subcommands that name containers (stop, rm, logs, …) write no file.
// On 3eefbceb each fine row was held; the neighbours stay held.
func TestCommandCmd50bFindNames(t *testing.T) {
	neighbours := []string{
		`find . -name 'pre-*' -path '*/hooks/*' -exec sed -i s/a/b/ {} +`,
		`find . -exec sed -i s/a/b/ {} +`,
		`find .git -name '*' -exec sed -i s/a/b/ {} +`,
		`find .git -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find .husky -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find ~ -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find / -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find ../x -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find -L . -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find . -follow -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find . -name '*.go' -o -name Makefile -exec sed -i s/a/b/ {} +`,
		`find . ! -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find . -not -name '*.go' -exec sed -i s/a/b/ {} +`,
		`find . \( -name '*.go' \) -exec sed -i s/a/b/ {} +`,
		`find . -exec sed -i s/a/b/ {} + -name '*.go'`,
		`find . -name '*.go*' -exec sed -i s/a/b/ {} +`,
		`find . -name '*.py' -exec sed -i s/a/b/ {} +`,   // sitecustomize.py, noxfile.py
		`find . -name '*.txt' -exec sed -i s/a/b/ {} +`,  // CMakeLists.txt
		`find . -name '*.js' -exec sed -i s/a/b/ {} +`,   // node_modules, .mongoshrc.js
		`find . -name '*.ts' -exec sed -i s/a/b/ {} +`,   // node_modules
		`find . -name '*.kts' -exec sed -i s/a/b/ {} +`,  // build.gradle.kts
		`find . -name '*.toml' -exec sed -i s/a/b/ {} +`, // pyproject.toml
		`find . -name '*.json' -exec sed -i s/a/b/ {} +`, // package.json
		`find . -name '*.sh' -exec sed -i s/a/b/ {} +`,   // .husky/_/husky.sh
		`find . -iname '*.MK' -exec sed -i s/a/b/ {} +`,
		`find . -name '*.go' -exec cp Makefile {} ';'`,
		`find . -name '*.go' -exec cp evil {}/../Makefile ';'`,
		`find . -name '*.go' -exec cp evil ../{} ';'`,
		`find . -name '*.go' -exec mv {} {}.mk ';'`,
		`find . -name '*.go' -execdir cp x pre-commit ';'`,
		`find . -name '*.go' -exec cp x .git/hooks/pre-commit ';'`,
		`find . -name '*.go' -exec sh -c 'x' ';'`,
		`find src -name '*.go' | xargs sed -i s/a/b/`,
		`find src -name '*.ts' | xargs sed -i s/a/b/`,
		`find src -name '*.go' -print0 | xargs sed -i s/a/b/`,
		`find src -name '*.go' -print0 | xargs -0 -a list sed -i s/a/b/`,
		`find src -name '*.go' -print0 -print | xargs -0 sed -i s/a/b/`,
		`find src -print0 | xargs -0 sed -i s/a/b/`,
		`find src -name '*.py' -print0 | xargs -0 sed -i s/a/b/`,
		`find .git -name '*.go' -print0 | xargs -0 sed -i s/a/b/`,
		`find src -name '*.go' -print0 | xargs -0 -I F cp Makefile F`,
		`grep -rl x src | xargs sed -i s/a/b/`,
		`grep -rlZ x src | xargs -0 sed -i s/a/b/`,
		// A test's value that looks like an action (-name -exec names a
		// file "-exec"): the action after it was read as -exec's words'
		// tail and its write went unread on 3eefbceb.
		`find . -name -exec -name '*.go' -exec cp x .git/hooks/pre-commit ';'`,
		`find . -path -ok -name '*.go' -exec sed -i s/a/b/ {} ';' -exec cp {} Makefile ';'`,
		`docker cp c:/x .git/hooks/pre-commit`,
		`docker container cp c:/x Makefile`,
		`docker save -o Makefile img`,
		`docker ps -q | xargs docker cp c:/x`,
	}
	fine := []string{
		`find . -name '*.go' -exec sed -i 's/a/b/' {} +`,
		`find src -name '*.go' -type f -exec sed -i s/a/b/ {} ';'`,
		`find . -type f -name '*.go' -exec gofmt -w {} +`,
		`find ./cmd internal -iname '*.GO' -exec sed -i s/a/b/ {} +`,
		`find . -maxdepth 3 -name '*.md' -exec sed -i s/a/b/ {} +`,
		`find src -name 'x.rs' -exec sed -i s/a/b/ {} +`,
		`find . -name '*.go' -exec mv {} {}.orig ';'`,
		`find . -name '*.go' -exec cp {} /tmp/backup/ ';'`,
		`find src -name '*.go' -print0 | xargs -0 sed -i s/a/b/`,
		`find src -type f -name '*.c' -print0 | xargs --null -n 10 sed -i s/a/b/`,
		`find src -name '*.go' -print0 | xargs -0 -I F cp F F.bak`,
		`docker ps -q | xargs docker stop`,
		`docker ps -aq | xargs docker kill`,
		`docker ps -q | xargs docker container kill`,
		`docker stop web`,
	}
	checkCommands(t, []string{"find *", "xargs *", "sed *", "gofmt *", "cp *", "mv *", "grep *", "docker *", "sh *"},
		neighbours, fine, neighbours, fine)
}

// TestCmd50bSafeFoundExts: no guarded name ends with an extension find's
// filters are trusted with, so a later guard list grown by such a name
// fails here instead of opening find -name '*.EXT' -exec sed -i.
func TestCmd50bSafeFoundExts(t *testing.T) {
	for _, ext := range safeFoundExts {
		if codeFile("x." + ext) {
			t.Errorf("x.%s is guarded, but find -name '*.%s' is read as finding no guarded file", ext, ext)
		}
		for _, n := range codeFileNames {
			if strings.HasSuffix(strings.ToLower(n), "."+ext) {
				t.Errorf("guarded name %q ends with .%s, an extension of safeFoundExts", n, ext)
			}
		}
	}
}
