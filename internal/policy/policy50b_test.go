package policy

import "testing"

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
