package slackinstall

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/casebook/casebook/internal/seal"
)

// sealInfo is the HKDF info string: changing it rotates every sealed secret.
const sealInfo = "casebook/slack/installation-secrets/v1"

// Sealer encrypts installation secrets at rest: AES-256-GCM with a key derived from the instance
// secret by HKDF-SHA256 (info sealInfo). The additional data binds a ciphertext to its installation
// and field, so a sealed token cannot be moved to another row or column.
type Sealer struct {
	aead   *seal.AEAD
	refKey []byte
}

// NewSealer derives the sealing key from the instance secret.
func NewSealer(instanceSecret []byte) (*Sealer, error) {
	if len(instanceSecret) < 16 {
		return nil, errors.New("slackinstall: instance secret too short")
	}
	aead, err := seal.New(instanceSecret, sealInfo)
	if err != nil {
		return nil, err
	}
	refKey, err := seal.Key(instanceSecret, refInfo)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, refKey: refKey}, nil
}

// refInfo derives the key of Ref.
const refInfo = "casebook/slack/effect-ref/v1"

// Ref is an opaque, deterministic reference to an effect key (HMAC-SHA256): what Slack message
// metadata carries, so no tenant or inquiry id reaches a channel.
func (s *Sealer) Ref(key string) string {
	m := hmac.New(sha256.New, s.refKey)
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Seal returns "v1:" + base64(nonce || ciphertext).
func (s *Sealer) Seal(plain, aad string) string {
	return "v1:" + base64.RawStdEncoding.EncodeToString(s.aead.Seal([]byte(plain), []byte(aad)))
}

// Open reverses Seal; a wrong key, aad or a tampered value is an error.
func (s *Sealer) Open(sealed, aad string) (string, error) {
	raw, ok := strings.CutPrefix(sealed, "v1:")
	if !ok {
		return "", errors.New("slackinstall: unknown sealed format")
	}
	b, err := base64.RawStdEncoding.DecodeString(raw)
	if err != nil {
		return "", errors.New("slackinstall: malformed sealed value")
	}
	plain, err := s.aead.Open(b, []byte(aad))
	if err != nil {
		return "", fmt.Errorf("slackinstall: open sealed value: %w", err)
	}
	return string(plain), nil
}
