package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/seal"
	"github.com/casebook/casebook/queries"
)

// tokens seals what the API hands out and later takes back, under keys derived from the instance
// secret (the same on every replica):
//   - list cursors carry an HMAC over the tenant, the filter and the position in the list, so a
//     forged cursor, or one from another tenant or filter, is refused (400);
//   - read-your-writes positions are encrypted (AES-GCM, the tenant as associated data): a log
//     position would tell one tenant how much every tenant writes, so clients only see an opaque
//     token, which only its tenant can use.
type tokens struct {
	cursorKey []byte
	positions *seal.AEAD
}

func newTokens(secret []byte) *tokens {
	if len(secret) == 0 {
		// A server without an instance secret (tests wiring the API alone): tokens hold within
		// this process only.
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	ck, err := seal.Key(secret, "casebook/httpapi cursor v1")
	if err != nil {
		panic(err) // only for an impossible key length
	}
	positions, err := seal.New(secret, "casebook/httpapi position v1")
	if err != nil {
		panic(err)
	}
	return &tokens{cursorKey: ck, positions: positions}
}

var b64 = base64.RawURLEncoding

func (t *tokens) cursorMAC(tenant domain.TenantID, f queries.Filter, raw string) []byte {
	m := hmac.New(sha256.New, t.cursorKey)
	breached, archived := "", ""
	if f.Breached != nil {
		breached = strconv.FormatBool(*f.Breached)
	}
	if f.Archived != nil {
		archived = strconv.FormatBool(*f.Archived)
	}
	for _, part := range []string{string(tenant), string(f.Status), string(f.Owner), string(f.Priority), f.Team, f.Receipt, f.Subject,
		breached, f.DueBefore.UTC().Format(time.RFC3339Nano), archived, raw} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)[:16]
}

// sealCursor binds the query layer's cursor to tenant and filter.
func (t *tokens) sealCursor(tenant domain.TenantID, f queries.Filter, raw string) string {
	return b64.EncodeToString([]byte(raw)) + "." + b64.EncodeToString(t.cursorMAC(tenant, f, raw))
}

// openCursor returns the query layer's cursor, or a 400 if c was not sealed for tenant and f.
func (t *tokens) openCursor(tenant domain.TenantID, f queries.Filter, c string) (string, error) {
	bad := &apiError{400, "bad_request", "cursor is not one this API returned for this filter"}
	rawB64, macB64, ok := strings.Cut(c, ".")
	raw, err1 := b64.DecodeString(rawB64)
	mac, err2 := b64.DecodeString(macB64)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(mac, t.cursorMAC(tenant, f, string(raw))) {
		return "", bad
	}
	return string(raw), nil
}

// sealPosition encrypts a log position for tenant.
func (t *tokens) sealPosition(tenant domain.TenantID, p eventstore.Position) string {
	return b64.EncodeToString(t.positions.Seal([]byte(p.String()), []byte(tenant)))
}

// openPosition decrypts a position token sealed for tenant; anything else is a 400.
func (t *tokens) openPosition(tenant domain.TenantID, tok string) (eventstore.Position, error) {
	bad := &apiError{400, "bad_request", "min_position is not a position this API returned"}
	b, err := b64.DecodeString(tok)
	if err != nil {
		return eventstore.Position{}, bad
	}
	plain, err := t.positions.Open(b, []byte(tenant))
	if err != nil {
		return eventstore.Position{}, bad
	}
	p, err := eventstore.ParsePosition(string(plain))
	if err != nil {
		return eventstore.Position{}, bad
	}
	return p, nil
}
