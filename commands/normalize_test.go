package commands_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// checkNormalized reports how out breaks Normalize's contract, or "".
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
		case unicode.IsControl(r), r >= '\u202A' && r <= '\u202E', r >= '\u2066' && r <= '\u2069':
			return fmt.Sprintf("control character %U", r)
		case r == '\u2028' || r == '\u2029', r == '\u200B', r == '\uFEFF', r == '\u2060':
			return fmt.Sprintf("separator or invisible character %U", r)
		}
	}
	return ""
}

// FuzzNormalize: Normalize's output is valid UTF-8, NFC, trimmed, free of control, bidi and
// stripped invisible characters (but "\n" and "\t" in multiline fields), normalizing it again
// changes nothing, and the domain accepts it as clean text unless nothing visible is left.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"", " ", "Ada Lovelace", "Ade\u0301la", "e\u0301\u0323", "\u1100\u1161\u11a8", "Hello\r\nworld\r", "tab\there",
		"\x00\x07\x1b[31mred", "\u202egnp.exe", "\u2066iso\u2069", "line\u2028sep\u2029para\u0085nel", "\xff\xfe bad",
		" \u00a0\u3000 spaced \u3000", "ﬁ ligature Å Å", "\u0301 leading combining", "a\u200db zero width joiner", "\r\r\n\n",
		"\u200b\u2060\ufeff", "\u3164", "a\u200bb@example.com", "\ufe0f", "\u20dd", "\U000e0100",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, multiline bool) {
		out := commands.Normalize(s, multiline)
		if problem := checkNormalized(out, multiline); problem != "" {
			t.Fatalf("Normalize(%+q, %v) = %+q: %s", s, multiline, out, problem)
		}
		if again := commands.Normalize(out, multiline); again != out {
			t.Fatalf("not idempotent: %+q → %+q → %+q", s, out, again)
		}
		// The domain accepts it as clean text; it refuses only text with nothing visible left.
		err := domain.CheckName("name", out, false)
		if !multiline && err != nil && utf8.RuneCountInString(out) <= domain.MaxNameLen && domain.Visible(out) {
			t.Fatalf("the domain refuses normalized %+q: %v", out, err)
		}
		if err == nil && out != "" && !domain.Visible(out) {
			t.Fatalf("the domain accepts invisible-only %+q", out)
		}
	})
}

// TestTextPolicy: every human text field, public and operator, goes through one policy: invisible
// and format characters do not count as content, controls and bidi overrides are removed, NUL never
// reaches the log, and email addresses keep RFC 5321's lengths.
func TestTextPolicy(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	invisible := []string{"\u200b", "\u200b\u2060\ufeff", "\u202e\u2066", "\u3164", " \u00ad ", "\u200e\u200f", "\x00\x01"}
	for _, v := range invisible {
		c := intake("k-subject")
		c.Tenant, c.Subject = tb.tenant, v
		if _, err := tb.h.Intake(ctx, c); !errorsIsValidation(err, "subject") {
			t.Errorf("subject %+q: %v, want a validation error on subject", v, err)
		}
		c = intake("k-message")
		c.Tenant, c.Message = tb.tenant, v+"\n\t"
		if _, err := tb.h.Intake(ctx, c); !errorsIsValidation(err, "message") {
			t.Errorf("message %+q: %v, want a validation error on message", v, err)
		}
	}
	res := tb.receive(t, "k1")
	target := commands.Target{Tenant: tb.tenant, InquiryID: res.InquiryID, Actor: tb.ops[0]}
	for _, v := range invisible {
		if _, err := tb.h.AddNote(ctx, commands.AddNote{Target: target, Body: v}); !errorsIsValidation(err, "body") {
			t.Errorf("note %+q: %v, want a validation error on body", v, err)
		}
		if _, err := tb.h.Transition(ctx, commands.Transition{Target: target, To: domain.StatusCancelled, Reason: v}); !errorsIsValidation(err, "reason") {
			t.Errorf("reason %+q: %v, want a validation error on reason", v, err)
		}
	}
	if _, err := tb.h.AddNote(ctx, commands.AddNote{Target: target, Body: "Called\x00 back \u202eevil\r\nok"}); err != nil {
		t.Fatal(err)
	}
	q, err := tb.h.Load(ctx, tb.tenant, res.InquiryID)
	if err != nil || q.Version != 2 {
		t.Fatalf("note not recorded: %v", err)
	}
	evs, err := tb.store.ReadStream(ctx, streamOf(tb.tenant, res.InquiryID), 1, 1)
	if err != nil || len(evs) != 1 {
		t.Fatal(err)
	}
	e, err := domain.Decode(evs[0].Type, domain.SchemaVersion, evs[0].Data)
	if err != nil || e.(domain.NoteAdded).Body != "Called back evil\nok" {
		t.Fatalf("stored note = %+v %v", e, err)
	}

	// Admin reasons, tenant display names and principal names: the same policy.
	for _, v := range invisible {
		if err := commands.CheckReason(commands.Normalize(v, false)); !errorsIsValidation(err, "reason") {
			t.Errorf("admin reason %+q: %v", v, err)
		}
		if _, err := tb.tenancy.SetProfile(ctx, "acme", &v, nil); !errorsIsValidation(err, "name") {
			t.Errorf("tenant display name %+q: %v", v, err)
		}
		if _, _, err := tb.tenancy.CreatePrincipal(ctx, "acme", v, domain.RoleOperator, "support"); !errorsIsValidation(err, "name") {
			t.Errorf("principal name %+q: %v", v, err)
		}
	}
	if err := commands.CheckReason(commands.Normalize(" rotate\x00 key ", false)); err != nil {
		t.Errorf("a reason with a NUL, normalized: %v", err)
	}

	local := strings.Repeat("a", 64)
	for email, ok := range map[string]bool{
		local + "@example.com":                   true,
		local + "a@example.com":                  false, // local part over 64 octets
		"a@" + strings.Repeat("d", 250) + ".com": false, // over 254 octets
		"a\u200d@example.com":                    false, // a kept format character
		"a\u200e@example.com":                    false,
		"a\u200b@example.com":                    true, // stripped by the policy, then valid
		"ada@example.com\u00a0":                  true, // trimmed
	} {
		c := intake("k-email-" + fmt.Sprint(len(email)) + fmt.Sprintf("%x", email[:3]))
		c.Tenant, c.Requester.Email = tb.tenant, email
		_, err := tb.h.Intake(ctx, c)
		if ok != (err == nil) || (!ok && !errorsIsValidation(err, "email")) {
			t.Errorf("email %+q (%d octets): %v, want ok=%v", email, len(email), err, ok)
		}
	}
}

func errorsIsValidation(err error, field string) bool {
	var ve *domain.ValidationError
	return errors.As(err, &ve) && ve.Field == field
}

func streamOf(tenant domain.TenantID, id domain.InquiryID) string {
	return eventstore.InquiryStream(tenant, id)
}
