package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// checkNormalized reports how out breaks normalize's contract, or "".
func checkNormalized(out string, multiline bool) string {
	switch {
	case !utf8.ValidString(out):
		return "invalid UTF-8"
	case !norm.NFC.IsNormalString(out):
		return "not NFC"
	case out != strings.TrimSpace(out):
		return "surrounding white space"
	}
	for _, r := range out {
		switch {
		case r == '\n' || r == '\t':
			if !multiline {
				return "line break or tab in a single-line field"
			}
		case unicode.IsControl(r) || isBidiControl(r):
			return "control character " + strconvQuote(r)
		case r == '\u2028' || r == '\u2029':
			return "unicode line separator"
		}
	}
	return ""
}

func strconvQuote(r rune) string { return fmt.Sprintf("%U", r) }

// FuzzNormalize: normalize's output is valid UTF-8, NFC, trimmed, free of control characters (but
// "\n" and "\t" in multiline fields), and normalizing it again changes nothing.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"", " ", "Ada Lovelace", "Ade\u0301la", "e\u0301\u0323", "\u1100\u1161\u11a8", "Hello\r\nworld\r", "tab\there",
		"\x00\x07\x1b[31mred", "\u202egnp.exe", "\u2066iso\u2069", "line\u2028sep\u2029para\u0085nel", "\xff\xfe bad",
		" \u00a0\u3000 spaced \u3000", "ﬁ ligature Å Å", "\u0301 leading combining", "a\u200db zero width joiner", "\r\r\n\n",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, multiline bool) {
		out := normalize(s, multiline)
		if problem := checkNormalized(out, multiline); problem != "" {
			t.Fatalf("normalize(%+q, %v) = %+q: %s", s, multiline, out, problem)
		}
		if again := normalize(out, multiline); again != out {
			t.Fatalf("not idempotent: %+q → %+q → %+q", s, out, again)
		}
	})
}

// FuzzIntakeDecode: any body decodes to a documented object or to a client error (400, 413, 415),
// never a panic or a 5xx; a decoded submission normalizes to fields that keep normalize's contract.
func FuzzIntakeDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"Ada","email":"ada@example.com","subject":"Invoice","message":"Hi\r\nthere","category":"billing"}`,
		`{"email":"a@b.co","subject":"s","message":"m","website":"http://spam.example"}`,
		`{"email":"a@b.co","subject":"s","message":"m","tenant_id":"x"}`,
		`{"email":"a@b.co"}{}`, `{"email":1}`, `[]`, `null`, ``, `{`, `{"name":"\ud800"}`, `{"name":"\u0000\u202e"}`,
		`{"message":"` + strings.Repeat("x", 70<<10) + `"}`, "{\"name\":\"\xff\"}", `{"Name":"case-insensitive key"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/public/acme/inquiries", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var in publicInquiry
		if err := decode(httptest.NewRecorder(), r, MaxPublicBody, &in); err != nil {
			if status, _ := statusOf(err); status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge && status != http.StatusUnsupportedMediaType {
				t.Fatalf("decode error maps to %d: %v", status, err)
			}
			return
		}
		n := in.normalized()
		for _, c := range []struct {
			v         string
			multiline bool
		}{{n.Name, false}, {n.Email, false}, {n.Subject, false}, {n.Message, true}, {n.Category, false}, {n.Website, false}} {
			if problem := checkNormalized(c.v, c.multiline); problem != "" {
				t.Fatalf("normalized field %+q: %s", c.v, problem)
			}
		}
		if n.normalized() != n {
			t.Fatal("normalizing a submission twice changed it")
		}
	})
}
