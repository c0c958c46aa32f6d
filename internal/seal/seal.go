// Package seal protects what toolgate hands to clients and keeps for later
// under one secret Key that every gateway instance shares: it signs tokens
// a client must return unchanged (MRTR requestState, task ids) with
// HMAC-SHA256, and seals values kept in the store (a task call's raw
// arguments) with AES-256-GCM. Each use takes its own label, from which a
// separate key is derived, so a token of one kind is never accepted as
// another.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the size of a key's secret, in bytes.
const KeySize = 32

// ErrInvalid is returned for a token or sealed value that was not made
// with this key and label, or was changed since.
var ErrInvalid = errors.New("seal: invalid or tampered")

// A Key is the shared secret. The zero Key is not usable; make one with
// [NewKey]. A Key is safe for concurrent use.
type Key struct {
	secret []byte
}

// NewKey returns the Key of secret, which must have at least KeySize
// bytes (a longer secret is used whole).
func NewKey(secret []byte) (Key, error) {
	if len(secret) < KeySize {
		return Key{}, fmt.Errorf("seal: a key needs at least %d bytes of secret, got %d", KeySize, len(secret))
	}
	return Key{secret: append([]byte(nil), secret...)}, nil
}

// Generate returns KeySize random bytes for a new secret.
func Generate() ([]byte, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("seal: generate a key: %w", err)
	}
	return b, nil
}

// Valid reports whether k was made by NewKey.
func (k Key) Valid() bool { return len(k.secret) >= KeySize }

// derive returns the key of label: HMAC-SHA256(secret, "toolgate/" + label).
func (k Key) derive(label string) []byte {
	m := hmac.New(sha256.New, k.secret)
	m.Write([]byte("toolgate/" + label))
	return m.Sum(nil)
}

// MAC returns HMAC-SHA256 under label's key of parts, each length-prefixed
// so that no two lists of parts give the same input.
func (k Key) MAC(label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, k.derive(label))
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write(p)
	}
	return m.Sum(nil)
}

// Sign returns payload as a token a client may carry and give back:
// base64url(payload) "." base64url(MAC). The payload is readable by
// anyone; Sign only makes it tamper-evident.
func (k Key) Sign(label string, payload []byte) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(k.MAC(label, payload))
}

// Verify returns the payload of a token Sign made with label, or
// ErrInvalid.
func (k Key) Verify(label, token string) ([]byte, error) {
	if !k.Valid() {
		return nil, ErrInvalid
	}
	p, m, ok := strings.Cut(token, ".")
	if !ok {
		return nil, ErrInvalid
	}
	enc := base64.RawURLEncoding
	payload, err := enc.DecodeString(p)
	if err != nil {
		return nil, ErrInvalid
	}
	mac, err := enc.DecodeString(m)
	if err != nil || !hmac.Equal(mac, k.MAC(label, payload)) {
		return nil, ErrInvalid
	}
	return payload, nil
}

// Seal encrypts plaintext under label's key with AES-256-GCM, bound to
// aad (which Open must be given again), and returns nonce ‖ ciphertext.
func (k Key) Seal(label string, plaintext, aad []byte) ([]byte, error) {
	g, err := k.aead(label)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plaintext)+g.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return g.Seal(nonce, nonce, plaintext, aad), nil
}

// Open decrypts what Seal returned for the same label and aad, or returns
// ErrInvalid.
func (k Key) Open(label string, sealed, aad []byte) ([]byte, error) {
	if !k.Valid() {
		return nil, ErrInvalid
	}
	g, err := k.aead(label)
	if err != nil {
		return nil, err
	}
	if len(sealed) < g.NonceSize() {
		return nil, ErrInvalid
	}
	out, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], aad)
	if err != nil {
		return nil, ErrInvalid
	}
	return out, nil
}

func (k Key) aead(label string) (cipher.AEAD, error) {
	if !k.Valid() {
		return nil, errors.New("seal: no key")
	}
	b, err := aes.NewCipher(k.derive(label))
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return cipher.NewGCM(b)
}
