package httpapi

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalize prepares one submitted text field: invalid UTF-8 becomes U+FFFD, line breaks become
// "\n" (CRLF from HTML forms included), control characters are removed (multiline fields keep "\n"
// and "\t"; single-line fields turn breaks and tabs into spaces), bidirectional embedding, override
// and isolate controls are removed (they disguise text), the result is Unicode NFC, and surrounding
// white space is trimmed. normalize is idempotent.
func normalize(s string, multiline bool) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch r {
		case '\r':
			if strings.HasPrefix(s[i:], "\n") {
				i++
			}
			r = '\n'
		case '\u0085', '\u2028', '\u2029':
			r = '\n'
		}
		switch {
		case r == '\n' || r == '\t':
			if !multiline {
				r = ' '
			}
		case unicode.IsControl(r) || isBidiControl(r):
			continue
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(norm.NFC.String(b.String()))
}

func isBidiControl(r rune) bool {
	return (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069')
}
