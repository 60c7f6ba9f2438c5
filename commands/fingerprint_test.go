package commands

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
)

// fingerprintCases are part lists, with whether appendParts writes them (fast) or leaves them
// to json.Marshal.
func fingerprintCases() []struct {
	parts []any
	fast  bool
} {
	return []struct {
		parts []any
		fast  bool
	}{
		{nil, true},
		{[]any{}, true},
		{[]any{"transition", "closed", "", nil}, true},
		{[]any{domain.SourcePublicForm, domain.Requester{Name: "Ada", Email: "ada@example.com"}, "Subject", "Body\nline", "general"}, true},
		{[]any{domain.SourceSlack, domain.Requester{SlackUser: "U123"}}, true},
		{[]any{domain.PrincipalID("p-1"), "<b>&amp;</b> \"quoted\" \\ back"}, true},
		{[]any{"\x00\x01\b\f\n\r\t\x1f\x7f", "日本語のお問い合わせ", "\u2028\u2029", "bad \xff\xfe utf8 \xe6\x97"}, true},
		{[]any{"follow_up", time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), 3 * time.Hour, "note"}, false},
		{[]any{"assign", []string{"a", "b"}}, false},
	}
}

// TestFingerprintMatchesJSON: the fingerprints stored with events hash json.Marshal's bytes,
// whichever path writes them.
func TestFingerprintMatchesJSON(t *testing.T) {
	for _, c := range fingerprintCases() {
		want := mustMarshal(t, c.parts)
		got, ok := appendParts(nil, c.parts)
		if ok != c.fast {
			t.Errorf("appendParts(%q) wrote it itself: %v, want %v", c.parts, ok, c.fast)
		}
		if ok {
			if diff := cmp.Diff(want, string(got)); diff != "" {
				t.Errorf("appendParts(%q) (-json.Marshal +got):\n%s", c.parts, diff)
			}
		}
		sum := sha256.Sum256([]byte(want))
		if fp, wantFP := fingerprint(c.parts...), base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]); fp != wantFP {
			t.Errorf("fingerprint(%q) = %s, want %s (of %s)", c.parts, fp, wantFP, want)
		}
	}
	// Every field of a Requester, set, is written as json.Marshal writes it: a field added
	// without appendParts learning it fails here.
	full := []any{domain.Requester{Name: "n", Email: "e", SlackUser: "s"}}
	if n := reflect.TypeFor[domain.Requester]().NumField(); n != 3 {
		t.Errorf("domain.Requester has %d fields; appendParts writes 3", n)
	}
	if got, _ := appendParts(nil, full); string(got) != mustMarshal(t, full) {
		t.Errorf("appendParts(%v) = %s, want %s", full, got, mustMarshal(t, full))
	}
	// A fingerprint as stored before the fast path existed (the SHA-256 of the JSON text above).
	parts := []any{domain.SourcePublicForm, domain.Requester{Name: "Ada", Email: "ada@example.com"}, "Subject", "Body", "general"}
	if got, want := fingerprint(parts...), "WYHHTEKUSJHONZIGEDO3OTORRQ"; got != want {
		t.Errorf("fingerprint = %s, want %s", got, want)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func FuzzFingerprintMatchesJSON(f *testing.F) {
	f.Add("Ada", "ada@example.com", "", "Subject", "Body\nline", "general")
	f.Add("<x>", "a&b", "U1", "\u2028", "\xff\x00", "日本")
	f.Fuzz(func(t *testing.T, name, email, slackUser, subject, message, category string) {
		parts := []any{domain.Source(category), domain.Requester{Name: name, Email: email, SlackUser: slackUser}, subject, message, domain.PrincipalID(name)}
		want, err := json.Marshal(parts)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendParts(nil, parts)
		if !ok {
			t.Fatal("fell back")
		}
		if string(got) != string(want) {
			t.Errorf("appendParts = %q, json.Marshal = %q", got, want)
		}
	})
}
