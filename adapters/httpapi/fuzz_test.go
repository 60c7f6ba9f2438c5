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

// FuzzCheckKeysFlat: where the flat reader reads a body, it refuses it exactly as the tokenizer
// does (the same error, or none).
func FuzzCheckKeysFlat(f *testing.F) {
	for _, s := range []string{
		`{"name":"Ada","email":"ada@example.com","subject":"Invoice","message":"Hi\r\nthere","category":"billing"}`,
		`{"name":"a","Name":"b"}`, `{"nope":1}`, `{"name":{"x":1,"X":2}}`, `{"name":{"x":1},"NAME":2}`,
		`{"name":"\u00e9","email":null,"subject":true}`, `{"name":"a"} `, `{"name":"a"}{}`, `{}`,
		`{"nam\u0065":"escaped key"}`, `{"ſ":1,"s":2}`, `{"name":{"ſ":1,"s":2}}`, `{"name":{"K":1,"k":2}}`, `{"name":[1]}`, `{"name":"a",}`,
	} {
		f.Add([]byte(s))
	}
	fields := jsonFields(&publicInquiry{})
	if ok, _ := checkFlatKeys([]byte(`{"name":"Ada","email":"ada@example.com","subject":"s","message":"Hi\r\n","category":"b"}`), fields); !ok {
		f.Fatal("a public intake's body is not read by the flat reader")
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ok, flat := checkFlatKeys(body, fields)
		if !ok {
			return
		}
		tokens := checkKeysTokens(body, fields)
		if (flat == nil) != (tokens == nil) || (flat != nil && flat.Error() != tokens.Error()) {
			t.Fatalf("flat: %v; tokens: %v", flat, tokens)
		}
	})
}
