package seal_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/casebook/casebook/internal/seal"
)

// TestSealOpen: a sealed value opens only with the same secret, purpose and aad, and not after
// tampering.
func TestSealOpen(t *testing.T) {
	t.Parallel()
	secret := bytes.Repeat([]byte{7}, 32)
	a, err := seal.New(secret, "p1")
	if err != nil {
		t.Fatal(err)
	}
	s := a.Seal([]byte("hello"), []byte("t1"))
	if got, err := a.Open(s, []byte("t1")); err != nil || string(got) != "hello" {
		t.Fatalf("Open = %q %v", got, err)
	}
	other, _ := seal.New(secret, "p2")
	tampered := append([]byte{}, s...)
	tampered[len(tampered)-1] ^= 1
	for name, try := range map[string]func() ([]byte, error){
		"other aad":     func() ([]byte, error) { return a.Open(s, []byte("t2")) },
		"other purpose": func() ([]byte, error) { return other.Open(s, []byte("t1")) },
		"tampered":      func() ([]byte, error) { return a.Open(tampered, []byte("t1")) },
		"short":         func() ([]byte, error) { return a.Open(s[:3], []byte("t1")) },
	} {
		if _, err := try(); !errors.Is(err, seal.ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", name, err)
		}
	}
	if bytes.Equal(a.Seal([]byte("hello"), nil), a.Seal([]byte("hello"), nil)) {
		t.Error("two seals of one value are equal: the nonce is not random")
	}
}
