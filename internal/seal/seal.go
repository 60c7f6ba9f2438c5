// Package seal derives keys from the instance secret and seals small values with them: one home for
// the HKDF-SHA256 → AES-256-GCM construction that Slack installation secrets and the API's
// read-your-writes tokens share.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

// Key derives a 32-byte key for purpose (the HKDF info string) from secret.
func Key(secret []byte, purpose string) ([]byte, error) {
	return hkdf.Key(sha256.New, secret, nil, purpose, 32)
}

// AEAD is AES-256-GCM under a key derived from secret for purpose.
type AEAD struct{ aead cipher.AEAD }

// New derives the AEAD for purpose from secret.
func New(secret []byte, purpose string) (*AEAD, error) {
	key, err := Key(secret, purpose)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &AEAD{aead: aead}, nil
}

// ErrOpen: a sealed value is malformed, tampered with, or sealed under another key or aad.
var ErrOpen = errors.New("seal: cannot open value")

// Seal returns nonce || ciphertext of plain, bound to aad.
func (a *AEAD) Seal(plain, aad []byte) []byte {
	nonce := make([]byte, a.aead.NonceSize(), a.aead.NonceSize()+len(plain)+a.aead.Overhead())
	_, _ = rand.Read(nonce)
	return a.aead.Seal(nonce, nonce, plain, aad)
}

// Open reverses Seal; anything else is ErrOpen.
func (a *AEAD) Open(sealed, aad []byte) ([]byte, error) {
	n := a.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrOpen
	}
	plain, err := a.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}
