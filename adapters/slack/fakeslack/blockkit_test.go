package fakeslack_test

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

func section(text string) slack.Block {
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil)
}

func button(label, value string) slack.Block {
	return slack.NewActionBlock("a", slack.NewButtonBlockElement("act", value, slack.NewTextBlockObject(slack.PlainTextType, label, false, false)))
}

// TestMessageLimitsRefused: chat.postMessage and chat.update refuse what Slack's Block Kit pages
// forbid, one case per rule, and accept the same payload at the limit.
func TestMessageLimitsRefused(t *testing.T) {
	t.Parallel()
	many := func(n int) []slack.Block {
		out := make([]slack.Block, n)
		for i := range out {
			out[i] = section("x")
		}
		return out
	}
	emoji := strings.Repeat("😀", 1500) // 1500 runes, 3000 UTF-16 units
	tests := []struct {
		name   string
		text   string
		blocks []slack.Block
		want   string // "" accepted
	}{
		{"section at 3000", "t", []slack.Block{section(strings.Repeat("&", 3000))}, ""},
		{"section over 3000", "t", []slack.Block{section(strings.Repeat("a", 3001))}, fakeslack.CodeInvalidBlocks},
		{"section of emoji at 3000 units", "t", []slack.Block{section(emoji)}, ""},
		{"section of emoji over 3000 units", "t", []slack.Block{section(emoji + "😀")}, fakeslack.CodeInvalidBlocks},
		{"empty section text", "t", []slack.Block{section("")}, fakeslack.CodeInvalidBlocks},
		{"header over 150", "t", []slack.Block{slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, strings.Repeat("h", 151), false, false))}, fakeslack.CodeInvalidBlocks},
		{"header at 150", "t", []slack.Block{slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, strings.Repeat("h", 150), false, false))}, ""},
		{"50 blocks", "t", many(50), ""},
		{"51 blocks", "t", many(51), fakeslack.CodeInvalidBlocks},
		{"button text over 75", "t", []slack.Block{button(strings.Repeat("b", 76), "v")}, fakeslack.CodeInvalidBlocks},
		{"button value over 2000", "t", []slack.Block{button("ok", strings.Repeat("v", 2001))}, fakeslack.CodeInvalidBlocks},
		{"button at limits", "t", []slack.Block{button(strings.Repeat("b", 75), strings.Repeat("v", 2000))}, ""},
		{"text over 40000", strings.Repeat("t", 40001), nil, fakeslack.CodeMsgTooLong},
		{"text at 40000", strings.Repeat("t", 40000), nil, ""},
		{"blocks too long together", "t", []slack.Block{section(strings.Repeat("a", 3000)), section(strings.Repeat("a", 3000)), section(strings.Repeat("a", 3000)), section(strings.Repeat("a", 3000)), section("a")}, fakeslack.CodeMsgBlocksTooLong},
		{"input block in a message", "t", []slack.Block{slack.NewInputBlock("i", slack.NewTextBlockObject(slack.PlainTextType, "L", false, false), nil, slack.NewPlainTextInputBlockElement(nil, "x"))}, fakeslack.CodeInvalidBlocks},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeslack.Options{})
			opts := []slack.MsgOption{slack.MsgOptionText(tt.text, false)}
			if tt.blocks != nil {
				opts = append(opts, slack.MsgOptionBlocks(tt.blocks...))
			}
			_, _, err := b.api.PostMessageContext(t.Context(), testChannel, opts...)
			if got := slackCode(err); got != tt.want || (tt.want == "" && err != nil) {
				t.Fatalf("postMessage = %q (%v), want %q", got, err, tt.want)
			}
			if tt.want == "" {
				return
			}
			if n := len(b.srv.Messages(testChannel)); n != 0 {
				t.Fatalf("a refused post left %d messages", n)
			}
			_, ok, _, err := b.api.SendMessageContext(t.Context(), testChannel, slack.MsgOptionText("fine", false))
			if err != nil {
				t.Fatal(err)
			}
			_, _, _, err = b.api.UpdateMessageContext(t.Context(), testChannel, ok, opts...)
			if got := slackCode(err); got != tt.want {
				t.Fatalf("update = %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestViewLimitsRefused: views.open refuses a modal Slack would refuse (invalid_arguments): a
// title over 24 characters, a plain_text_input max_length over 3000 (the "Add note" defect), more
// than 100 blocks; the same modal within the limits opens.
func TestViewLimitsRefused(t *testing.T) {
	t.Parallel()
	txt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	input := func(max int) slack.Block {
		e := slack.NewPlainTextInputBlockElement(txt("Internal note"), "note")
		e.Multiline, e.MaxLength = true, max
		return slack.NewInputBlock("note", txt("Note"), nil, e)
	}
	modal := func(title string, blocks ...slack.Block) slack.ModalViewRequest {
		return slack.ModalViewRequest{Type: slack.VTModal, Title: txt(title), Submit: txt("Save"), Close: txt("Close"),
			CallbackID: "cb", Blocks: slack.Blocks{BlockSet: blocks}}
	}
	hundred := make([]slack.Block, 101)
	for i := range hundred {
		hundred[i] = section("x")
	}
	tests := []struct {
		name string
		view slack.ModalViewRequest
		ok   bool
	}{
		{"max_length 3000", modal("Add note", input(3000)), true},
		{"max_length 10000", modal("Add note", input(10000)), false},
		{"title of 24", modal(strings.Repeat("t", 24), input(10)), true},
		{"title of 25", modal(strings.Repeat("t", 25), input(10)), false},
		{"100 blocks", modal("Many", hundred[:100]...), true},
		{"101 blocks", modal("Many", hundred...), false},
		{"no blocks", modal("Empty"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeslack.Options{})
			_, err := b.api.OpenViewContext(t.Context(), b.srv.IssueTrigger(), tt.view)
			if tt.ok && err != nil {
				t.Fatalf("open = %v", err)
			}
			if !tt.ok && slackCode(err) != fakeslack.CodeInvalidArguments {
				t.Fatalf("open = %v, want %s", err, fakeslack.CodeInvalidArguments)
			}
		})
	}
}
