package policy

import "testing"

// TestCommandPolicy49Pagers (policy49): read-only tools that run a
// program named in an option: git grep -O CMD (git runs CMD with the
// shell on the matching files), rg --pre and --hostname-bin, and their
// siblings in ugrep, ag, ack, bat, sdiff, pandoc, fzf and fd (-x runs a
// command per found path, as find -exec), and their settings in the
// environment (RIPGREP_CONFIG_PATH, ACK_PAGER, FZF_DEFAULT_COMMAND, …)
// or in .ackrc and .ugrep. On 0939e27a a deny rule for "rm *" and an
// allow rule for the tool allowed each.
func TestCommandPolicy49Pagers(t *testing.T) {
	bypass := []string{
		`git grep -O'rm -rf ~' x`,
		`git grep --open-files-in-pager=CMD x`,
		`git grep -OCMD x`,
		`git grep -nO'rm x' foo`,
		`git grep --open-files='rm x' foo`,
		`git -C . grep -Ox foo`,
		`rg --pre CMD x`,
		`rg --pre=CMD x`,
		`rg -n --pre ./x.sh foo`,
		`rg --hostname-bin=CMD x`,
		`rg --hostname-bin CMD x`,
		`ugrep --filter='*:rm x' foo`,
		`ug --pager=x foo`,
		`ag --pager x foo`,
		`ack --pager='rm x' foo`,
		`bat --pager=x f`,
		`sdiff --diff-program=x a b`,
		`pandoc --filter ./x a.md`,
		`pandoc -F./x a.md`,
		`fzf --preview 'rm {}'`,
		`fzf --bind 'enter:execute(rm {})'`,
		`fd -e go -x rm {}`,
		`fd -HX rm`,
		`fdfind --exec rm {} x`,
		`fd --exec-batch rm`,
		// Their settings in the environment and in files.
		`RIPGREP_CONFIG_PATH=./x rg foo`,
		`env ACK_PAGER='rm x' ack foo`,
		`FZF_DEFAULT_COMMAND='rm x' fzf`,
		`echo '--pager=rm x' > .ackrc`,
		`cp x ~/.ugrep`,
		// less's +cmd runs as if typed (! a shell, v an editor, | a pipe).
		`less '+!rm x' f`,
		`less ++v f`,
		`less '+|rm x' f`,
		`less -k keys f`,
		`less --lesskey-src=k f`,
		`less -o .git/hooks/pre-commit`,
		`less --log-file=Makefile`,
		`LESS='+!rm x' git log`,
		`LESSKEY=./k git log`,
		`env LESSEDIT='rm x' less f`,
	}
	fine := []string{
		`git grep -n foo`,
		`git grep -O foo`,
		`git grep --open-files-in-pager foo`,
		`git grep -e -Ox foo`,
		`rg -n foo`,
		`rg -z foo`,
		`rg --pre-glob '*.gz' foo`,
		`rg -uu --hidden foo`,
		`ugrep -n foo`,
		`ag foo`,
		`ack foo`,
		`bat -n f`,
		`sdiff a b`,
		`pandoc -o out.html a.md`,
		`fzf --filter x`,
		`fd -e go`,
		`fd -H -t f foo src`,
		`less f`,
		`less -R f`,
		`less +G f`,
		`less +100 -N f`,
	}
	checkCommands(t, []string{"git grep *", "git -C . grep *", "rg *", "ugrep *", "ug *", "ag *", "ack *", "bat *", "sdiff *",
		"pandoc *", "fzf *", "fd *", "fdfind *", "env *", "echo *", "cp *", "less *", "git log"}, bypass,
		append(fine, `LESS=-R git log`, `LESS=-FRX less f`), bypass, fine)
}
