package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func key(t *testing.T, b byte) Key {
	t.Helper()
	k, err := NewKey(bytes.Repeat([]byte{b}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNewKeyNeedsEnoughSecret(t *testing.T) {
	if _, err := NewKey(make([]byte, KeySize-1)); err == nil {
		t.Fatal("a short secret must be refused")
	}
	if (Key{}).Valid() {
		t.Fatal("the zero Key is not valid")
	}
	if _, err := (Key{}).Verify("x", "a.b"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero key Verify = %v", err)
	}
	g, err := Generate()
	if err != nil || len(g) != KeySize {
		t.Fatalf("Generate = %d bytes, %v", len(g), err)
	}
}

func TestSignVerify(t *testing.T) {
	k := key(t, 1)
	tok := k.Sign("state", []byte(`{"a":1}`))
	got, err := k.Verify("state", tok)
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("Verify = %s, %v", got, err)
	}
	p, m, _ := strings.Cut(tok, ".")
	for name, bad := range map[string]string{
		"other label":    "", // checked below
		"other key":      "",
		"payload edited": p[:len(p)-1] + "A" + "." + m,
		"mac edited":     p + "." + m[:len(m)-1] + "A",
		"no dot":         p + m,
		"empty":          "",
	} {
		var err error
		switch name {
		case "other label":
			_, err = k.Verify("task", tok)
		case "other key":
			_, err = key(t, 2).Verify("state", tok)
		default:
			_, err = k.Verify("state", bad)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Verify = %v, want ErrInvalid", name, err)
		}
	}
}

func TestMACSeparatesParts(t *testing.T) {
	k := key(t, 3)
	if bytes.Equal(k.MAC("l", []byte("ab"), []byte("c")), k.MAC("l", []byte("a"), []byte("bc"))) {
		t.Fatal("parts must be length-prefixed")
	}
}

func TestSealOpen(t *testing.T) {
	k := key(t, 4)
	s, err := k.Seal("args", []byte("secret arguments"), []byte("approval-1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(s, []byte("secret")) {
		t.Fatal("the sealed value shows the plaintext")
	}
	got, err := k.Open("args", s, []byte("approval-1"))
	if err != nil || string(got) != "secret arguments" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := k.Open("args", s, []byte("approval-2")); !errors.Is(err, ErrInvalid) {
		t.Errorf("other aad: %v", err)
	}
	if _, err := key(t, 5).Open("args", s, []byte("approval-1")); !errors.Is(err, ErrInvalid) {
		t.Errorf("other key: %v", err)
	}
	s[len(s)-1] ^= 1
	if _, err := k.Open("args", s, []byte("approval-1")); !errors.Is(err, ErrInvalid) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := k.Open("args", []byte{1, 2}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("short: %v", err)
	}
}
