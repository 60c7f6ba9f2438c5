package callbacks_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/callbacks"
)

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

func signed(secret string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", callbacks.SignatureHeader(secret, ts, body))
	return h
}

// TestVerify: valid, tampered (one byte), wrong secret, expired, future, malformed headers.
func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte("payload=%7B%22type%22%3A%22block_actions%22%7D")
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-1] ^= 1
	cases := []struct {
		name    string
		h       http.Header
		body    []byte
		secrets []string
		want    error
		idx     int
	}{
		{"valid", signed("s2", t0, body), body, []string{"s1", "s2"}, nil, 1},
		{"one byte different", signed("s2", t0, body), tampered, []string{"s1", "s2"}, callbacks.ErrSignature, -1},
		{"one byte shorter", signed("s2", t0, body), body[:len(body)-1], []string{"s2"}, callbacks.ErrSignature, -1},
		{"unknown secret", signed("other", t0, body), body, []string{"s1", "s2"}, callbacks.ErrSignature, -1},
		{"no secrets", signed("s1", t0, body), body, nil, callbacks.ErrSignature, -1},
		{"expired", signed("s1", t0.Add(-5*time.Minute-time.Second), body), body, []string{"s1"}, callbacks.ErrStale, -1},
		{"edge of window", signed("s1", t0.Add(-5*time.Minute), body), body, []string{"s1"}, nil, 0},
		{"future", signed("s1", t0.Add(5*time.Minute+time.Second), body), body, []string{"s1"}, callbacks.ErrStale, -1},
		{"no timestamp", http.Header{"X-Slack-Signature": {"v0=00"}}, body, []string{"s1"}, callbacks.ErrStale, -1},
		{"no signature", http.Header{"X-Slack-Request-Timestamp": {strconv.FormatInt(t0.Unix(), 10)}}, body, []string{"s1"}, callbacks.ErrSignature, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			idx, err := callbacks.Verify(c.h, c.body, t0, c.secrets)
			if !errors.Is(err, c.want) || idx != c.idx {
				t.Fatalf("Verify = %d, %v; want %d, %v", idx, err, c.idx, c.want)
			}
		})
	}
}

// TestVerifyReplayedRequest: a captured request replayed after the window fails although its
// signature is valid.
func TestVerifyReplayedRequest(t *testing.T) {
	t.Parallel()
	body := []byte("payload={}")
	h := signed("s1", t0, body)
	if _, err := callbacks.Verify(h, body, t0.Add(time.Minute), []string{"s1"}); err != nil {
		t.Fatalf("fresh: %v", err)
	}
	if _, err := callbacks.Verify(h, body, t0.Add(6*time.Minute), []string{"s1"}); !errors.Is(err, callbacks.ErrStale) {
		t.Fatalf("replayed after 6 min: %v", err)
	}
}

// FuzzVerify: Verify never panics, and accepts a body only with a signature made over exactly
// that body and timestamp by a known secret.
func FuzzVerify(f *testing.F) {
	f.Add([]byte("payload=%7B%7D"), "1793523600", "v0=00", "s1")
	f.Add([]byte(""), "+1793523600", "v0=", "")
	f.Add([]byte("x"), "-1", "v1=abc", "s")
	f.Add([]byte("payload=\x00\xff"), "1793523600", "v0="+string(make([]byte, 64)), "secret")
	f.Fuzz(func(t *testing.T, body []byte, ts, sig, secret string) {
		h := http.Header{}
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set("X-Slack-Signature", sig)
		idx, err := callbacks.Verify(h, body, t0, []string{secret})
		if err == nil {
			if idx != 0 || secret == "" || sig != callbacks.SignatureHeader(secret, ts, body) {
				t.Fatalf("accepted a forged request: ts=%q sig=%q", ts, sig)
			}
		}
		// A correct signature is accepted whenever the timestamp is in the window.
		good := signed(secret, t0, body)
		if _, err := callbacks.Verify(good, body, t0, []string{secret}); secret != "" && err != nil {
			t.Fatalf("refused a valid request: %v", err)
		}
	})
}

func signatureFor(sec, ts, body string) string {
	return callbacks.SignatureHeader(sec, ts, []byte(body))
}
