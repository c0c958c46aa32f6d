package policy

import "testing"

// TestCommandReview49bArchiveOrder (review49b): 7z reads its switches
// anywhere, so the archive is the second word that is no switch (7z -y a
// ARCHIVE), and jar's f, m and e take their words in the order of the
// letters (jar cmf MANIFEST FILE). On 28089b9d the archive written below
// was read as "a" or the manifest, and .git/hooks/pre-commit was missed.
func TestCommandReview49bArchiveOrder(t *testing.T) {
	bypass := []string{
		`7z -y a .git/hooks/pre-commit x`,
		`7z -tzip a .git/hooks/pre-commit x`,
		`7za -mx9 u .git/hooks/pre-commit x`,
		`jar cmf m.txt .git/hooks/pre-commit x`,
		`jar -c -m m.txt -f .git/hooks/pre-commit x`,
		`jar cef Main .git/hooks/pre-commit x`,
	}
	fine := []string{
		`7z a out.7z src`,
		`7z -y a out.7z src`,
		`7z x -y in.7z -oout`,
		`jar cf app.jar -C build .`,
		`jar cmf manifest.txt app.jar -C build .`,
		`jar cfe app.jar Main -C build .`,
		`jar -c -m manifest.txt -f app.jar -C build .`,
	}
	checkCommands(t, []string{"7z *", "7za *", "jar *"}, bypass, fine, bypass, fine)
}

// TestCommandReview49bArchiveEnv (review49b): tar -c writes the archive
// TAPE names when it has no -f, and zip reads options (-O FILE) from
// ZIPOPT. On 28089b9d a deny rule for "rm *" let each write
// .git/hooks/pre-commit, which it matches as opaque when written with -f
// or -O.
func TestCommandReview49bArchiveEnv(t *testing.T) {
	bypass := []string{
		`TAPE=.git/hooks/pre-commit tar -c x`,
		`export TAPE=.git/hooks/pre-commit; tar -c x`,
		`ZIPOPT='-O .git/hooks/pre-commit' zip out.zip x`,
	}
	fine := []string{
		`tar -cf out.tar src`,
		`zip -r out.zip src`,
	}
	checkCommands(t, []string{"tar *", "zip *", "export *"}, bypass, fine, bypass, fine)
}

// TestCommandReview49bNinjaNames (review49b): ninja-build and samu read
// -f FILE as ninja does, a build file that is code: policy49b read them
// as ninja for -t msvc, but on 28089b9d samu -f notes.txt ran a file
// whose writes the matcher does not guard as a build file (ninja -f
// notes.txt was refused).
func TestCommandReview49bNinjaNames(t *testing.T) {
	bypass := []string{
		`samu -f notes.txt`,
		`ninja-build -f notes.txt`,
		`samu -fnotes.txt`,
	}
	fine := []string{
		`samu -C build`,
		`ninja-build -C build test`,
		`samu -f build/build.ninja`,
	}
	checkCommands(t, []string{"samu *", "ninja-build *"}, bypass, fine, bypass, fine)
}
