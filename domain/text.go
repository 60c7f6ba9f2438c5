package domain

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Casebook's one policy for human text: every free-text field, public (name, email, subject,
// message, category) or operator (note bodies, reasons, principal names), is cleaned by CleanText
// (commands.Normalize adds Unicode NFC) and then checked by the domain, which refuses what cleaning
// would have removed, so a caller that skipped it fails closed.
//
// Removed: control characters (Cc, NUL included: Postgres cannot store it) except "\n" and "\t" in
// multiline fields; bidirectional embedding, override and isolate controls (they disguise text);
// invisible characters that carry no meaning in a field (zero-width space, word joiner and
// invisible operators, byte-order mark, Mongolian vowel separator). Kept: the zero-width joiner and
// non-joiner and the bidi marks (LRM, RLM, ALM), which scripts and emoji need. A required field,
// and an optional one that is given, must hold a visible character: one that is graphic and
// neither white space, a mark (combining marks and variation selectors only modify a character
// before them), a format character (Cf) nor a blank letter such as U+3164 HANGUL FILLER.

// stripped reports whether CleanText removes r (line breaks and tabs are handled apart).
func stripped(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.IsControl(r), isBidiControl(r):
		return true
	}
	switch r {
	case '\u200B', '\u2060', '\u2061', '\u2062', '\u2063', '\u2064', '\uFEFF', '\u180E':
		return true
	}
	return false
}

func isBidiControl(r rune) bool {
	return (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069')
}

// blank letters render as nothing although Unicode classes them as letters or symbols.
func blank(r rune) bool {
	switch r {
	case '\u3164', '\u115F', '\u1160', '\uFFA0', '\u2800', '\u034F', '\u17B4', '\u17B5':
		return true
	}
	return false
}

// CleanText applies the policy to one field, short of NFC: invalid UTF-8 becomes U+FFFD, line
// breaks become "\n" (CRLF, CR, NEL, LS and PS), single-line fields turn breaks and tabs into
// spaces, removed characters go, and surrounding white space is trimmed. It is idempotent.
func CleanText(s string, multiline bool) string {
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
		case stripped(r):
			continue
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// Visible reports whether s holds at least one visible character.
func Visible(s string) bool {
	for _, r := range s {
		if unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.IsMark(r) && !unicode.Is(unicode.Cf, r) && !blank(r) {
			return true
		}
	}
	return false
}

// checkClean refuses text that CleanText would change by removing characters: controls (NUL
// included), bidi controls and the stripped invisible characters; "\n" and "\t" only in
// multiline fields.
func checkClean(field, v string, multiline bool) error {
	if !utf8.ValidString(v) {
		return Invalid(field, "must be valid UTF-8")
	}
	for _, r := range v {
		if (r == '\n' || r == '\t') && !multiline || stripped(r) {
			return Invalid(field, "must not contain control or invisible formatting characters")
		}
	}
	return nil
}

// CheckName validates a display name (principals, requesters): single-line clean text of at most
// MaxNameLen characters; required names must be visible.
func CheckName(field, v string, required bool) error {
	return checkLine(field, v, required, MaxNameLen)
}

// CutRunes keeps the first n runes of s (all of s when it has fewer).
func CutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
