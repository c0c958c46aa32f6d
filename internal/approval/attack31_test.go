package approval

import "testing"

// TestKeyHidesOnlyItsSecret (attack31): in a key that a pattern matches
// only the match is hidden, as in a string value. On 01049d8 the whole key
// was shown as "[redacted key 1]": an agent could keep any key out of the
// reviewer's sight (here the path of a file it writes through a map of
// files) by putting a token-shaped part in it, while the same path as a
// value showed all but the token.
func TestKeyHidesOnlyItsSecret(t *testing.T) {
	rd := DefaultRedaction()
	raw := []byte(`{"files":{"/etc/cron.d/` + ghToken + `":"* * * * * root sh","/etc/cron.d/x` + ghToken + `":1},"path":"/etc/cron.d/` + ghToken + `"}`)
	disp, warnings, err := Display(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"files":{"/etc/cron.d/[redacted key 1]":"* * * * * root sh","/etc/cron.d/x[redacted key 2]":1},"path":"/etc/cron.d/[redacted: looks like a GitHub token]"}`
	if string(disp) != want {
		t.Errorf("copy %s, want %s (warnings %q)", disp, want, warnings)
	}
	checkKeysNaive(t, raw, rd, ghToken)

	// Shown keys stay unique whatever marker texts the keys as received hold.
	raw = []byte(`{"[redacted key 2]` + ghToken + `":1,"` + ghToken + `[redacted key 1]":2,"[redacted key 2][redacted key 1]":3,"a` + ghToken + `":4,"a[redacted key 3]":5}`)
	disp, _, err = Display(raw, rd)
	if err != nil {
		t.Fatal(err)
	}
	// The keys' own marker texts are written \u005B… (fixes33: lookAlikes).
	want = `{"\u005Bredacted key 2][redacted key 2]":1,"[redacted key 3]\u005Bredacted key 1]":2,"\u005Bredacted key 2]\u005Bredacted key 1]":3,"a[redacted key 4]":4,"a\u005Bredacted key 3]":5}`
	if string(disp) != want {
		t.Errorf("copy %s, want %s", disp, want)
	}
	checkKeysNaive(t, raw, rd, ghToken)
}
