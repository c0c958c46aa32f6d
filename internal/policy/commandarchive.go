package policy

import "strings"

// Archivers' output files (branch policy49). An archiver writing an
// archive writes a file as cp does: zip ~/.bashrc x, ar rc Makefile x.o
// and 7z a .git/hooks/pre-commit x each plant a file a program may later
// run (its content is the archive's, which an archive of chosen bytes
// makes a script: a shell runs a file whose first line it can read).
// archiveFiles returns the archive files of zip, ar, 7z, rar, jar, cpio
// (-O, -F) and pax (-f) (name, a base name) with words; tar's -f in a writing mode is tarExtractDirs's.
// A word that may be an option's value is read as the archive too (fails
// closed).
func archiveFiles(name string, words []cmdWord) []string {
	switch name {
	case "zip":
		// zip [options] ARCHIVE [files]; -O/--output-file names a new
		// archive (outputFiles reads --out; -O is zip's own).
		files := operandAt(words, 0, "-b", "-n", "-t", "-tt", "-P", "-Z", "-s", "-sp", "-sb", "-O", "--out", "--output-file",
			"--temp-path", "--suffixes", "--password", "--compression-method", "--split-size", "--from-date", "--before-date", "-ll", "-la", "-lf", "-li")
		for i := 1; i < len(words); i++ {
			if opt, val, hasVal := strings.Cut(words[i].lit, "="); opt == "-O" || longOption(opt, "--output-file") && strings.HasPrefix(opt, "--o") {
				files = append(files, fileOf(valueWord(words, &i, val, hasVal)))
			}
		}
		return files
	case "ar", "jar":
		// ar KEY[mods] [relpos] [count] ARCHIVE files: the archive is
		// the first word after the key that is no option; every word up
		// to it is read as the archive too (a, b, i take a member name
		// first, N a count). jar cf FILE: the word after the key; its
		// f, m (manifest), e (entry point) and i (index) each take the
		// next word that is no option, in the order of the letters (jar
		// cmf MANIFEST FILE, jar -c -m MANIFEST -f FILE; review49b):
		// every one of those words is read as the archive.
		var files []string
		jarValues := 1
		if name == "jar" {
			jarValues = max(1, jarValueCount(words))
		}
		for i := 2; i < len(words); i++ {
			w := words[i].lit
			if strings.HasPrefix(w, "-") && name == "jar" {
				continue
			}
			files = append(files, fileOf(words[i]))
			if name == "jar" && len(files) >= jarValues || name == "ar" && (!strings.ContainsAny(words[1].lit, "abiN") || len(files) > 2) {
				break
			}
		}
		if name == "jar" {
			for i := 1; i < len(words); i++ {
				if opt, val, hasVal := strings.Cut(words[i].lit, "="); longOption(opt, "--file") {
					files = append(files, fileOf(valueWord(words, &i, val, hasVal)))
				}
			}
		}
		return files
	case "cpio", "pax":
		// cpio -o's -O FILE, -F FILE, --file[=]FILE (read as written in
		// any mode: -F names the input of -i) and pax -w's -f FILE.
		var files []string
		for i := 1; i < len(words); i++ {
			w := words[i].lit
			opt, val, hasVal := strings.Cut(w, "=")
			switch {
			case name == "cpio" && strings.HasPrefix(w, "--") && longOption(opt, "--file"):
				files = append(files, fileOf(valueWord(words, &i, val, hasVal)))
			case strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") && len(w) > 1:
				letters := "OF"
				if name == "pax" {
					letters = "f"
				}
				if k := strings.IndexAny(w, letters); k > 0 {
					files = append(files, fileOf(valueWord(words, &i, w[k+1:], true)))
				}
			}
		}
		return files
	case "7z", "7za", "7zr", "7zz", "rar":
		// 7z COMMAND [switches] ARCHIVE files: the second word that is
		// no switch (a, u, d, rn, x -o…: extraction's -oDIR is read by
		// outputFiles). Switches may come before the command too (7z -y a
		// ARCHIVE; review49b); after "--" every word is no switch.
		var files []string
		nonSwitch, ended := 0, false
		for _, w := range words[1:] {
			if !ended && w.lit == "--" {
				ended = true
				continue
			}
			if ended || !strings.HasPrefix(w.lit, "-") {
				if nonSwitch++; nonSwitch == 2 {
					files = append(files, fileOf(w))
					break
				}
			}
		}
		return files
	}
	return nil
}

// jarValueCount counts the letters f, m, e and i in jar's key (words[1],
// with or without its dash) and its other short options: the words each
// takes, in order, from the words that are no option.
func jarValueCount(words []cmdWord) int {
	n := 0
	for i, w := range words[1:] {
		if strings.HasPrefix(w.lit, "--") || i > 0 && !strings.HasPrefix(w.lit, "-") {
			continue
		}
		for _, c := range strings.TrimPrefix(w.lit, "-") {
			if strings.ContainsRune("fmei", c) {
				n++
			}
		}
	}
	return n
}
