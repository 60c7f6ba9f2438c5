// Package callbacks turns Slack's signed requests into Casebook commands. A request is read as
// exact raw bytes, its timestamp and signature are verified, and only then is it parsed and
// authorized: the installation comes from the verified payload's workspace and app, the actor from
// the Slack user → principal link of that installation, and the inquiry from the stored root
// message mapping (installation, channel, root ts), never from ids in the payload alone.
package callbacks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxSkew is how far a request's timestamp may be from now.
const MaxSkew = 5 * time.Minute

// Verification errors. Both answer 401 and are logged without the request's content.
var (
	ErrStale     = errors.New("slack request timestamp missing or outside the allowed window")
	ErrSignature = errors.New("slack request signature invalid")
)

// Verify checks a request's X-Slack-Request-Timestamp (within MaxSkew of now) and
// X-Slack-Signature ("v0=" + hex HMAC-SHA256 of "v0:{ts}:{body}") against each secret, in
// constant time per secret. It returns the index of the first secret that signed body.
func Verify(h http.Header, body []byte, now time.Time, secrets []string) (int, error) {
	raw := h.Get("X-Slack-Request-Timestamp")
	ts, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || raw == "" || raw[0] == '+' || raw[0] == '-' {
		return -1, ErrStale
	}
	if d := now.Unix() - ts; d > int64(MaxSkew/time.Second) || d < -int64(MaxSkew/time.Second) {
		return -1, ErrStale
	}
	hexSig, ok := strings.CutPrefix(h.Get("X-Slack-Signature"), "v0=")
	if !ok {
		return -1, ErrSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return -1, ErrSignature
	}
	found := -1
	for i, sec := range secrets {
		if sec == "" {
			continue
		}
		if hmac.Equal(got, Sign(sec, raw, body)) && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return -1, ErrSignature
	}
	return found, nil
}

// Sign returns the raw HMAC-SHA256 Slack puts, hex-encoded after "v0=", in X-Slack-Signature.
func Sign(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return m.Sum(nil)
}

// SignatureHeader is the X-Slack-Signature value for body (tests and the dev helper sign with it).
func SignatureHeader(secret, ts string, body []byte) string {
	return "v0=" + hex.EncodeToString(Sign(secret, ts, body))
}
