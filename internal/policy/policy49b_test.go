package policy

import "testing"

// TestCommandPolicy49Archives (policy49): an archiver's output file is a
// write as cp's destination is: tar -f in a mode that writes the archive
// (-c, -r, -u, -A, --create, --append, --update, old-style cf), zip's
// archive, ar's, 7z's, rar's and jar's, cpio's -O/-F, pax -w's -f, a
// compressor's -S suffix (gzip -S rc ~/.bash writes ~/.bashrc) and lz4
// IN OUT. On 0939e27a a deny rule for "rm *" and
// an allow rule for "tar *", "zip *", … allowed each bypass.
func TestCommandPolicy49Archives(t *testing.T) {
	bypass := []string{
		`tar -cf ~/.bashrc x`,
		`tar cf Makefile x`,
		`tar --create --file ~/.bashrc x`,
		`tar -c -f .git/hooks/pre-commit x`,
		`tar -czf .git/config x`,
		`tar -cvf.git/hooks/pre-commit x`,
		`tar -rf Makefile x`,
		`tar --append --file=.bashrc x`,
		`tar -uf ~/.profile x`,
		`tar --cre --fil=~/.local/bin/git x`,
		`bsdtar -cf Makefile x`,
		`sudo tar -cf /etc/profile.d/x.sh x`,
		`zip Makefile x`,
		`zip -r ~/.bashrc x`,
		`zip -q .git/hooks/pre-commit x`,
		`zip -b /tmp .git/hooks/pre-commit x`,
		`ar rc Makefile x.o`,
		`ar rcs .git/hooks/pre-commit x.o`,
		`7z a Makefile x`,
		`jar cf .git/hooks/pre-commit x`,
		`rar a Makefile x`,
		`ls | cpio -o -F Makefile`,
		`ls | cpio -o -O .git/hooks/pre-commit`,
		`ls | cpio -o --file=Makefile`,
		`pax -w -f Makefile x`,
		// A compressor's suffix and lz4's output operand.
		`gzip -S rc ~/.bash`,
		`gzip --suffix=rc ~/.bash`,
		`xz -S rc ~/.bash`,
		`pigz -r -S .sh .git/hooks`,
		`lz4 x Makefile`,
	}
	fine := []string{
		`tar -cf build/out.tar dist`,
		`tar -czf dist.tgz build`,
		`tar cf out.tar src`,
		`tar -xf a.tar`,
		`tar -tf Makefile.tar`,
		`tar -cf - src`,
		`zip -r out.zip dist`,
		`zip -q -r build/out.zip . -x '*.git*'`,
		`ar rcs libx.a a.o b.o`,
		`7z a out.7z dist`,
		`jar cf app.jar -C build .`,
		`rar a out.rar src`,
		`ls | cpio -o -O out.cpio`,
		`pax -w -f out.pax src`,
		`gzip big.log`,
		`gzip -S .z big.log`,
		`xz -k big.log`,
		`lz4 big.log big.log.lz4`,
	}
	checkCommands(t, []string{"tar *", "bsdtar *", "sudo tar *", "zip *", "ar *", "7z *", "jar *", "rar *", "ls *", "cpio *",
		"pax *", "gzip *", "xz *", "pigz *", "lz4 *"}, bypass, fine, bypass, fine)
}
