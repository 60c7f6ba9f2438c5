package slackinstall_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
)

// TestFitCutsVisiblyOnBoundaries: a text that fits is unchanged; one that does not ends with the
// ellipsis, fits, keeps entities whole and never strands a combining mark or a joiner.
func TestFitCutsVisiblyOnBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw string
		max       int
		want      string
	}{
		{"fits", "a&b", 7, "a&amp;b"},
		{"entity kept whole", "ab&cd", 7, "ab…"},
		{"entity fits exactly", "a&bc", 7, "a&amp;…"},
		{"combining mark goes with its base", "abe\u0301c", 4, "ab…"},
		{"emoji counts two units", "😀😀", 3, "😀…"},
		{"joiner not left at the end", "a👨\u200d👩", 5, "a👨…"},
		{"skin tone goes with its base", "a👍🏽", 4, "a…"},
		{"no room", "abc", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := slackinstall.FitEscaped(tt.raw, tt.max)
			if got != tt.want {
				t.Fatalf("FitEscaped(%q, %d) = %q, want %q", tt.raw, tt.max, got, tt.want)
			}
		})
	}
	if got := slackinstall.Fit("plain", 5); got != "plain" {
		t.Fatalf("Fit of a fitting text = %q", got)
	}
}

// FuzzFitEscaped: whatever the input, the result fits, is valid UTF-8, is a prefix of the escaped
// text (plus the ellipsis when cut) and never ends inside an entity.
func FuzzFitEscaped(f *testing.F) {
	for _, s := range []string{"", "&&&&", "<a|b>", "e\u0301\u0301", "👩\u200d💻 &amp;", "\xff\xfe"} {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, raw string, max int) {
		if max < 0 || max > 5000 {
			return
		}
		got := slackinstall.FitEscaped(raw, max)
		if slackinstall.TextLen(got) > max {
			t.Fatalf("FitEscaped(%q, %d) = %q: %d units", raw, max, got, slackinstall.TextLen(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 %q", got)
		}
		esc := slackinstall.EscapeMrkdwn(strings.ToValidUTF8(raw, "\uFFFD"))
		if got == esc {
			return
		}
		body, cut := strings.CutSuffix(got, slackinstall.Ellipsis)
		if got != "" && (!cut || !strings.HasPrefix(esc, body)) {
			t.Fatalf("FitEscaped(%q, %d) = %q is not a cut prefix of %q", raw, max, got, esc)
		}
		if i := strings.LastIndexByte(body, '&'); i >= 0 && !strings.Contains(body[i:], ";") {
			t.Fatalf("cut inside an entity: %q", got)
		}
	})
}
