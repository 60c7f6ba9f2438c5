package lists

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// MarkerVersion prefixes every ownership marker; another prefix is not ours.
const MarkerVersion = "cb1"

const markerInfo = "casebook/slack/list-marker/v1"

// Markers makes and checks ownership markers. The key is derived from the instance secret with
// HKDF-SHA256, so a marker cannot be made without it.
type Markers struct{ key []byte }

// NewMarkers derives the marker key from the instance secret.
func NewMarkers(instanceSecret []byte) (*Markers, error) {
	if len(instanceSecret) < 16 {
		return nil, errors.New("lists: instance secret too short")
	}
	k, err := hkdf.Key(sha256.New, instanceSecret, nil, markerInfo, 32)
	if err != nil {
		return nil, err
	}
	return &Markers{key: k}, nil
}

// For returns the marker of inquiry (opaque reference ref, its receipt) in list of tenant:
// "cb1.<ref>.<hmac>", the HMAC over version, tenant, list, inquiry and ref.
func (m *Markers) For(tenant, list, inquiry, ref string) string {
	return MarkerVersion + "." + ref + "." + m.mac(tenant, list, inquiry, ref)
}

func (m *Markers) mac(tenant, list, inquiry, ref string) string {
	h := hmac.New(sha256.New, m.key)
	h.Write([]byte(MarkerVersion + "\x00" + tenant + "\x00" + list + "\x00" + inquiry + "\x00" + ref))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
}

// Verify reports whether marker is exactly the one For makes: a copy from another List or tenant,
// a forgery or a foreign value is false.
func (m *Markers) Verify(marker, tenant, list, inquiry, ref string) bool {
	return hmac.Equal([]byte(marker), []byte(m.For(tenant, list, inquiry, ref)))
}

// ParseMarker splits a marker into its reference and MAC; ok is false for anything not in the
// cb1 format (a foreign row).
func ParseMarker(s string) (ref, mac string, ok bool) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 3 || parts[0] != MarkerVersion || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}
