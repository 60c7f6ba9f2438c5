package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestPublicIntakeRefusesInvisibleOnlyFields: a name, subject or message made only of characters
// that show nothing (one class per row) is a 422 naming the field, never an inquiry. The optional
// name is the exception where the text policy strips every character (white space, zero-width
// space, byte-order mark, bidi controls): what is left is no name, as an empty field is.
func TestPublicIntakeRefusesInvisibleOnlyFields(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	classes := []struct {
		class, s string
		stripped bool // the text policy removes it all
	}{
		{"variation selector", "\uFE0F", false},
		{"combining mark", "\u0301", false},
		{"enclosing mark", "\u20DD", false},
		{"zero-width joiner", "\u200D", false},
		{"zero-width space", "\u200B", true},
		{"byte-order mark", "\uFEFF", true},
		{"bidi controls", "\u202E\u2066", true},
		{"bidi marks", "\u200E\u200F", false},
		{"soft hyphen", "\u00AD", false},
		{"tag characters", "\U000E0041", false},
		{"Hangul filler", "\u3164", false},
		{"braille blank", "\u2800", false},
		{"wide spaces", "\u00A0\u3000", true},
	}
	before := tb.logLen(t)
	for _, c := range classes {
		for _, field := range []string{"name", "subject", "message"} {
			if field == "name" && c.stripped {
				continue
			}
			body := map[string]string{"name": "Ada", "email": "ada@example.com", "subject": "Invoice", "message": "Wrong total"}
			body[field] = c.s
			raw, _ := json.Marshal(body)
			r := tb.intake(t, "acme", nil, string(raw))
			e, _ := r.body["error"].(map[string]any)
			if r.status != http.StatusUnprocessableEntity || r.code() != "validation_failed" || e["field"] != field {
				t.Errorf("%s in %s = %d %s, want 422 validation_failed on %s", c.class, field, r.status, r.raw, field)
			}
		}
	}
	if after := tb.logLen(t); after != before {
		t.Fatalf("the log grew by %d events", after-before)
	}
}
