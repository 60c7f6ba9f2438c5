package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/casebook/casebook/commands"
)

// FuzzIntakeDecode: any body decodes to a documented object or to a client error (400, 413, 415),
// never a panic or a 5xx; a decoded submission goes through the one text policy.
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
		// The policy's contract is FuzzNormalize's (package commands); here: it is applied whole.
		n := in.normalized()
		if n.Message != commands.Normalize(in.Message, true) || n.Name != commands.Normalize(in.Name, false) {
			t.Fatal("a field skipped the text policy")
		}
		if n.normalized() != n {
			t.Fatal("normalizing a submission twice changed it")
		}
	})
}
