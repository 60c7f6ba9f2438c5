package slackinstall

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Slack's Block Kit limits. Every surface Casebook renders (messages, modals, buttons) stays inside
// them after escaping; fakeslack refuses what exceeds them, from its own copy of the same pages.
const (
	// MaxSectionText: a section's text, 1–3000 characters (docs.slack.dev/reference/block-kit/blocks/section-block).
	MaxSectionText = 3000
	// MaxHeaderText: a header's plain_text, 150 characters (…/blocks/header-block).
	MaxHeaderText = 150
	// MaxMessageBlocks and MaxModalBlocks: blocks per message and per modal (…/reference/block-kit/blocks).
	MaxMessageBlocks = 50
	MaxModalBlocks   = 100
	// MaxModalTitle: a modal's title, 24 characters (docs.slack.dev/reference/views/modal-views).
	MaxModalTitle = 24
	// MaxModalButton: a modal's submit and close labels, 24 characters (same page).
	MaxModalButton = 24
	// MaxPlainTextInput: a plain_text_input's max_length, 1–3000 (…/block-elements/plain-text-input-element).
	MaxPlainTextInput = 3000
	// MaxButtonText and MaxActionValue: a button's text (75) and value (2000) (…/block-elements/button-element).
	MaxButtonText  = 75
	MaxActionValue = 2000
	// MaxOptionText and MaxOptionValue: an option's text (75) and value (150) characters
	// (…/composition-objects/option-object).
	MaxOptionText  = 75
	MaxOptionValue = 150
	// MaxActionsElements: elements of one actions block (…/blocks/actions-block).
	MaxActionsElements = 25
	// MaxMessageText: chat.postMessage's text, 40,000 characters (docs.slack.dev/reference/methods/chat.postMessage).
	MaxMessageText = 40000
	// MaxBlocksText: the text of one message's blocks together. Slack answers msg_blocks_too_long
	// past an undocumented size (reported near 13,000 characters); 12,000 is our reading, and the
	// fake's.
	MaxBlocksText = 12000
)

// Ellipsis ends every text Casebook had to cut, so a reader sees that it was cut.
const Ellipsis = "…"

// TextLen is the length Casebook counts against Slack's limits: UTF-16 code units. Slack says
// "characters" without defining them; UTF-16 units are never fewer than runes, so a text that fits
// by this count fits under either reading.
func TextLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r) // invalid bytes decode to U+FFFD: one unit
	}
	return n
}

// EscapeMrkdwn neutralises Slack mrkdwn control characters in user-supplied text.
func EscapeMrkdwn(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Fit returns s unchanged when it fits in max (TextLen), else its longest prefix that fits with
// Ellipsis appended. It cuts on a rune boundary and never between a character and the combining
// marks or joiners that follow it. s must already be in its final (escaped) form; invalid UTF-8
// becomes U+FFFD.
func Fit(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if TextLen(s) <= max {
		return s
	}
	return cut(splitRunes(s), max)
}

// FitEscaped escapes raw for mrkdwn and fits the result in max, never splitting an entity
// ("&amp;" is kept whole or dropped whole).
func FitEscaped(raw string, max int) string {
	raw = strings.ToValidUTF8(raw, "\uFFFD")
	esc := EscapeMrkdwn(raw)
	if TextLen(esc) <= max {
		return esc
	}
	units := make([]string, 0, len(raw))
	for _, r := range raw {
		units = append(units, EscapeMrkdwn(string(r)))
	}
	return cut(units, max)
}

func splitRunes(s string) []string {
	out := make([]string, 0, len(s))
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

// cut keeps the longest run of whole units that, with Ellipsis, fits in max; a unit that
// continues the character before it (a combining mark, a variation selector, a joiner) is never
// the first one dropped: the character goes with it.
func cut(units []string, max int) string {
	budget := max - TextLen(Ellipsis)
	if budget < 0 {
		return ""
	}
	n, used := 0, 0
	for n < len(units) {
		l := TextLen(units[n])
		if used+l > budget {
			break
		}
		used += l
		n++
	}
	for n > 0 && n < len(units) && continues(units[n]) {
		n-- // units[n] would be dropped: drop what it continues too
	}
	for n > 0 && joins(units[n-1]) {
		n-- // never end on a joiner
	}
	return strings.Join(units[:n], "") + Ellipsis
}

// continues reports whether u attaches to the character before it.
func continues(u string) bool {
	r, _ := utf8.DecodeRuneInString(u)
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc) || unicode.Is(unicode.Variation_Selector, r) ||
		r == '\u200d' || (r >= 0x1F3FB && r <= 0x1F3FF) // emoji skin-tone modifiers
}

func joins(u string) bool { return u == "\u200d" }
