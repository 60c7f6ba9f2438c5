package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/casebook/casebook/domain"
)

func TestCutRunes(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"héllo", 2, "hé"}, {"日本語", 2, "日本"}, {"abc", 5, "abc"}, {"abc", 0, ""}, {"", 3, ""}} {
		if got := domain.CutRunes(c.in, c.n); got != c.want {
			t.Errorf("CutRunes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// invisibleClasses are text made only of characters that show nothing on their own, one class each.
var invisibleClasses = []struct{ class, s string }{
	{"variation selector", "\uFE0F"},
	{"ideographic variation selector", "\U000E0100"},
	{"combining mark", "\u0301"},
	{"enclosing mark", "\u20DD"},
	{"combining grapheme joiner", "\u034F"},
	{"zero-width joiner", "\u200D"},
	{"zero-width non-joiner", "\u200C"},
	{"soft hyphen", "\u00AD"},
	{"bidi marks", "\u200E\u200F\u061C"},
	{"tag characters", "\U000E0041\U000E007F"},
	{"Mongolian free variation selector", "\u180B"},
	{"Hangul fillers", "\u3164\u115F\u1160\uFFA0"},
	{"braille blank", "\u2800"},
	{"Khmer inherent vowels", "\u17B4\u17B5"},
	{"wide spaces", "\u00A0\u2003\u3000"},
	{"marks on spaces", " \u0301\uFE0F "},
}

// TestVisibleRefusesInvisibleOnly: text made only of marks, format characters, blank letters or
// spaces has nothing visible, and a field holding it is refused by its name, required or not;
// one visible character (with its marks) is enough.
func TestVisibleRefusesInvisibleOnly(t *testing.T) {
	t.Parallel()
	for _, c := range invisibleClasses {
		if domain.Visible(c.s) {
			t.Errorf("%s %+q: Visible = true", c.class, c.s)
		}
		for _, required := range []bool{true, false} {
			err := domain.CheckText("subject", c.s, required, 200, false)
			var ve *domain.ValidationError
			if !errors.As(err, &ve) || ve.Field != "subject" || !strings.Contains(ve.Reason, "visible") {
				t.Errorf("%s %+q (required %v): %v, want a validation error on subject about visible characters", c.class, c.s, required, err)
			}
		}
	}
	for _, s := range []string{"e\u0301", "\u2764\uFE0F", "a\u200Db", "\U0001F469\u200D\U0001F4BB", "\u1100\u1161", "x"} {
		if !domain.Visible(s) {
			t.Errorf("%+q: Visible = false", s)
		}
		if err := domain.CheckText("subject", s, true, 200, false); err != nil {
			t.Errorf("%+q: %v", s, err)
		}
	}
	if err := domain.CheckText("subject", "", false, 200, false); err != nil {
		t.Errorf("an empty optional field: %v", err)
	}
}
