package fakeslack

import (
	"encoding/json"
	"unicode/utf16"
)

// Error codes for Block Kit payloads Slack refuses.
const (
	// CodeMsgTooLong: chat.postMessage/chat.update text over 40,000 characters
	// (docs.slack.dev/reference/methods/chat.postMessage, "msg_too_long").
	CodeMsgTooLong = "msg_too_long"
	// CodeMsgBlocksTooLong: the blocks of one message too long together
	// (same page, "msg_blocks_too_long"; the size is undocumented, see maxBlocksText).
	CodeMsgBlocksTooLong = "msg_blocks_too_long"
)

// Slack's Block Kit limits as the fake enforces them. Each cites the page it encodes. The fake
// keeps its own copy (it imports nothing of Casebook's), so a renderer that drifts is caught.
const (
	maxMessageText   = 40000 // chat.postMessage: "text … truncated … 40,000 characters"; longer is msg_too_long
	maxMessageBlocks = 50    // reference/block-kit/blocks: "up to 50 blocks in each message"
	maxModalBlocks   = 100   // same page: "up to 100 blocks in modals"
	maxSectionText   = 3000  // reference/block-kit/blocks/section-block: text 1–3000
	maxSectionFields = 10    // same page: at most 10 fields
	maxFieldText     = 2000  // same page: each field's text at most 2000
	maxHeaderText    = 150   // reference/block-kit/blocks/header-block
	maxContextElems  = 10    // reference/block-kit/blocks/context-block
	maxActionsElems  = 25    // reference/block-kit/blocks/actions-block
	maxButtonText    = 75    // reference/block-kit/block-elements/button-element
	maxActionValue   = 2000  // same page: value at most 2000
	maxActionID      = 255   // same page: action_id at most 255
	maxOptionText    = 75    // reference/block-kit/composition-objects/option-object
	maxOptionValue   = 150   // same page
	maxBlockID       = 255   // reference/block-kit/blocks: block_id at most 255
	maxModalTitle    = 24    // reference/views/modal-views (view object): title, submit, close ≤ 24
	maxInputLabel    = 2000  // reference/block-kit/blocks/input-block: label at most 2000
	maxInputLength   = 3000  // reference/block-kit/block-elements/plain-text-input-element: max_length 1–3000
	maxPlaceholder   = 150   // same page: placeholder at most 150
	// maxBlocksText is a guess: Slack refuses a message whose blocks are too long together
	// (msg_blocks_too_long) at an undocumented size, reported near 13,000 characters of text.
	maxBlocksText = 12000
)

// textLen counts UTF-16 code units: Slack says "characters" without defining them; this reading
// is the stricter one for text outside the Basic Multilingual Plane (emoji).
func textLen(s string) int { return len(utf16.Encode([]rune(s))) }

type textObj struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type element struct {
	Type        string   `json:"type"`
	ActionID    string   `json:"action_id"`
	Text        *textObj `json:"text"`
	Value       string   `json:"value"`
	Placeholder *textObj `json:"placeholder"`
	Options     []option `json:"options"`
	MaxLength   *int     `json:"max_length"`
	MinLength   *int     `json:"min_length"`
}

type option struct {
	Text  textObj `json:"text"`
	Value string  `json:"value"`
}

type block struct {
	Type     string          `json:"type"`
	BlockID  string          `json:"block_id"`
	Text     *textObj        `json:"text"`
	Fields   []textObj       `json:"fields"`
	Elements json.RawMessage `json:"elements"` // actions: elements; context: text objects and images
	Element  *element        `json:"element"`
	Label    *textObj        `json:"label"`
}

// checkBlocks applies the per-block limits and returns the text the blocks carry (for the
// message-wide msg_blocks_too_long check). ok is false when a block breaks a rule.
func checkBlocks(blocks []block) (total int, ok bool) {
	for _, b := range blocks {
		if textLen(b.BlockID) > maxBlockID {
			return 0, false
		}
		switch b.Type {
		case "section":
			if b.Text == nil && len(b.Fields) == 0 {
				return 0, false
			}
			if b.Text != nil {
				n := textLen(b.Text.Text)
				if n < 1 || n > maxSectionText {
					return 0, false
				}
				total += n
			}
			if len(b.Fields) > maxSectionFields {
				return 0, false
			}
			for _, f := range b.Fields {
				if textLen(f.Text) > maxFieldText {
					return 0, false
				}
				total += textLen(f.Text)
			}
		case "header":
			if b.Text == nil || b.Text.Type != "plain_text" || textLen(b.Text.Text) > maxHeaderText {
				return 0, false
			}
			total += textLen(b.Text.Text)
		case "context":
			var els []json.RawMessage
			if json.Unmarshal(b.Elements, &els) != nil || len(els) == 0 || len(els) > maxContextElems {
				return 0, false
			}
		case "actions":
			var els []*element
			if json.Unmarshal(b.Elements, &els) != nil || len(els) == 0 || len(els) > maxActionsElems {
				return 0, false
			}
			for _, e := range els {
				n, ok := checkElement(e)
				if !ok {
					return 0, false
				}
				total += n
			}
		case "input":
			if b.Label == nil || textLen(b.Label.Text) > maxInputLabel || b.Element == nil {
				return 0, false
			}
			if _, ok := checkElement(b.Element); !ok {
				return 0, false
			}
		case "divider", "rich_text", "image", "markdown", "file", "video":
		default:
			return 0, false
		}
	}
	return total, true
}

func checkElement(e *element) (int, bool) {
	if e == nil || textLen(e.ActionID) > maxActionID {
		return 0, false
	}
	if e.Placeholder != nil && textLen(e.Placeholder.Text) > maxPlaceholder {
		return 0, false
	}
	switch e.Type {
	case "button":
		if e.Text == nil || textLen(e.Text.Text) > maxButtonText || textLen(e.Value) > maxActionValue {
			return 0, false
		}
		return textLen(e.Text.Text), true
	case "static_select", "multi_static_select":
		n := 0
		for _, o := range e.Options {
			if textLen(o.Text.Text) > maxOptionText || textLen(o.Value) > maxOptionValue {
				return 0, false
			}
			n += textLen(o.Text.Text)
		}
		return n, true
	case "plain_text_input":
		if e.MaxLength != nil && (*e.MaxLength < 1 || *e.MaxLength > maxInputLength) {
			return 0, false
		}
		if e.MinLength != nil && (*e.MinLength < 0 || *e.MinLength > maxInputLength) {
			return 0, false
		}
	}
	return 0, true
}

// checkMessage applies Slack's limits to a message's text and blocks (raw may be nil).
func checkMessage(text string, raw json.RawMessage) *apiError {
	if textLen(text) > maxMessageText {
		return errCode(CodeMsgTooLong)
	}
	if raw == nil {
		return nil
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil || len(blocks) > maxMessageBlocks {
		return errCode(CodeInvalidBlocks)
	}
	for _, b := range blocks {
		if b.Type == "input" {
			return errCode(CodeInvalidBlocks) // input blocks belong to modals
		}
	}
	total, ok := checkBlocks(blocks)
	if !ok {
		return errCode(CodeInvalidBlocks)
	}
	if total > maxBlocksText {
		return errCode(CodeMsgBlocksTooLong)
	}
	return nil
}

// checkView applies Slack's limits to a modal view; views.open answers invalid_arguments for a
// view that breaks them (docs.slack.dev/reference/methods/views.open).
func checkView(title string, submit, closeText *textObj, raw json.RawMessage) bool {
	if n := textLen(title); n < 1 || n > maxModalTitle {
		return false
	}
	for _, t := range []*textObj{submit, closeText} {
		if t != nil && textLen(t.Text) > maxModalTitle {
			return false
		}
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil || len(blocks) == 0 || len(blocks) > maxModalBlocks {
		return false
	}
	_, ok := checkBlocks(blocks)
	return ok
}
