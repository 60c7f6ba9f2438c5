package threads

import (
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

// The root message's action ids (slackinstall.Action*) are handled by package callbacks.
const (
	ActionClaim    = slackinstall.ActionClaim
	ActionResolve  = slackinstall.ActionResolve
	ActionAssignMe = slackinstall.ActionAssignMe
	ActionStatus   = slackinstall.ActionStatus
	ActionAssign   = slackinstall.ActionAssign
	ActionNote     = slackinstall.ActionNote
	ActionCancel   = slackinstall.ActionCancel
	ActionRemind   = slackinstall.ActionRemind
)

// maxFieldText bounds one free-text field other than the message (after escaping), so that a
// root message's blocks together stay far below what Slack accepts (slackinstall.MaxBlocksText).
const maxFieldText = 1000

// Rendered is a message ready for chat.postMessage or chat.update.
type Rendered struct {
	Text   string // notification fallback, redacted like the blocks
	Blocks []slack.Block
}

// field is one line of a rendered message; Class is looked up in domain.FieldClasses.
type field struct{ name, label, value string }

// cleared keeps the fields a destination of clearance may show. It is the one redaction policy:
// every field of every message passes through it, unknown fields fail closed.
func cleared(clearance domain.Classification, fs []field) []field {
	out := fs[:0:0]
	for _, f := range fs {
		if f.value != "" && domain.Cleared(f.name, clearance) {
			out = append(out, f)
		}
	}
	return out
}

func coarse(s domain.Status) string {
	if s.Terminal() {
		return "closed"
	}
	return "open"
}

func fieldsOf(q *domain.Inquiry, link string) []field {
	return []field{
		{"receipt", "Receipt", q.Receipt},
		{"status", "Status", string(q.Status)},
		{"status.coarse", "State", coarse(q.Status)},
		{"priority", "Priority", string(q.Priority)},
		{"category", "Category", q.Category},
		{"owner", "Owner", string(q.Owner)},
		{"team", "Team", q.Team},
		{"requester.name", "From", q.Requester.Name},
		{"requester.email", "Email", q.Requester.Email},
		{"subject", "Subject", q.Subject},
		{"message", "Message", q.Message},
		{"link", "Open", link},
	}
}

// RenderRoot renders an inquiry's root message for a destination of the given clearance. Every
// text stays inside Slack's limits after escaping (slackinstall.Max*): a field too long for its
// section is cut with a visible ellipsis, and the message gets a section of its own. owner is the
// inquiry's owner as Slack names them (a mention, else a name where cleared): never an id. Every
// element's value carries q.Version (slackinstall.ActionValue), so a click on an outdated message
// is recognised.
func RenderRoot(q *domain.Inquiry, clearance domain.Classification, link string, owner slackinstall.Person) Rendered {
	fs := cleared(clearance, fieldsOf(q, link))
	title := "Inquiry " + q.Receipt
	if q.Archived {
		title += " (archived)"
	}
	lines := []string{"*" + slackinstall.FitEscaped(title, maxFieldText) + "*"}
	for _, f := range fs {
		if f.name == "status" {
			continue // shown with status.coarse below only when status is not cleared
		}
		if f.name == "status.coarse" && domain.Cleared("status", clearance) {
			f.label, f.value = "Status", string(q.Status)
		}
		switch f.name {
		case "link":
			if l := fmt.Sprintf("<%s|Open in Casebook>", f.value); slackinstall.TextLen(l) <= maxFieldText {
				lines = append(lines, l) // our own configured URL; one too long is left out, not cut
			}
		case "owner":
			lines = append(lines, "*"+f.label+":* "+ownerText(owner, clearance))
		case "message":
			prefix := "*" + f.label + ":*\n"
			lines = append(lines, prefix+slackinstall.FitEscaped(f.value, slackinstall.MaxSectionText-slackinstall.TextLen(prefix)))
		default:
			prefix := "*" + f.label + ":* "
			lines = append(lines, prefix+slackinstall.FitEscaped(f.value, maxFieldText-slackinstall.TextLen(prefix)))
		}
	}
	blocks := sections(lines)
	if els := actions(q, clearance); len(els) > 0 {
		blocks = append(blocks, slack.NewActionBlock("casebook_actions", els...))
	}
	text := slackinstall.Fit(fmt.Sprintf("%s (%s)", slackinstall.EscapeMrkdwn(title), statusFor(q, clearance)), slackinstall.MaxMessageText)
	return Rendered{Text: text, Blocks: blocks}
}

// sections packs lines (each at most MaxSectionText) into as few mrkdwn sections as fit.
func sections(lines []string) []slack.Block {
	var out []slack.Block
	var cur []string
	n := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, strings.Join(cur, "\n"), false, false), nil, nil))
		}
		cur, n = nil, 0
	}
	for _, l := range lines {
		l = slackinstall.Fit(l, slackinstall.MaxSectionText)
		add := slackinstall.TextLen(l)
		if len(cur) > 0 {
			add++ // the newline
		}
		if n+add > slackinstall.MaxSectionText {
			flush()
			add = slackinstall.TextLen(l)
		}
		cur, n = append(cur, l), n+add
	}
	flush()
	return out
}

// actions are the root message's elements for the inquiry's current state. They reveal no more
// than the message does: where the exact status (or owner) is not cleared, they depend only on
// open/closed (and not on the owner).
func actions(q *domain.Inquiry, clearance domain.Classification) []slack.BlockElement {
	txt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, slackinstall.Fit(s, slackinstall.MaxButtonText), false, false)
	}
	button := func(id, label string) *slack.ButtonBlockElement {
		return slack.NewButtonBlockElement(id, slackinstall.ActionValue(q.Receipt, q.Version, slackinstall.MaxActionValue), txt(label))
	}
	if q.Archived || q.Erased {
		return nil // an archived inquiry takes no operator action but unarchive (not offered in Slack)
	}
	exact := domain.Cleared("status", clearance)
	var els []slack.BlockElement
	open := !q.Status.Terminal()
	if open && (q.Owner == "" || !domain.Cleared("owner", clearance)) {
		els = append(els, button(ActionClaim, "Claim").WithStyle(slack.StylePrimary))
	}
	if open {
		els = append(els, button(ActionAssignMe, "Assign to me"))
	}
	if can, _ := domain.CanTransition(q.Status, domain.StatusResolved); can || (open && !exact) {
		els = append(els, button(ActionResolve, "Resolve"))
	}
	if exact {
		var opts []*slack.OptionBlockObject
		for _, to := range domain.Statuses {
			// resolved has its button, a reason needs the cancel modal (the select carries none)
			if can, needsReason := domain.CanTransition(q.Status, to); can && !needsReason && to != domain.StatusResolved {
				opts = append(opts, slack.NewOptionBlockObject(slackinstall.ActionValue(string(to), q.Version, slackinstall.MaxOptionValue),
					txt(strings.ReplaceAll(string(to), "_", " ")), nil))
			}
		}
		if len(opts) > 0 {
			els = append(els, slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, txt("Move to…"), ActionStatus, opts...))
		}
	}
	els = append(els, button(ActionNote, "Add note"))
	if open {
		els = append(els, button(ActionRemind, "Remind me"), button(ActionAssign, "Assign…"), button(ActionCancel, "Cancel…").WithStyle(slack.StyleDanger))
	}
	return els
}

// statusFor is the status a destination may see: exact when cleared, else open/closed.
// An archived inquiry says so.
func statusFor(q *domain.Inquiry, clearance domain.Classification) string {
	st := coarse(q.Status)
	if domain.Cleared("status", clearance) {
		st = string(q.Status)
	}
	if q.Archived {
		st += ", archived"
	}
	return st
}

// ownerText names the owner for a destination of clearance; never a principal id.
func ownerText(owner slackinstall.Person, clearance domain.Classification) string {
	if t := owner.Text(clearance); t != "" {
		return t
	}
	return slackinstall.Unlinked
}

// RenderReply renders the thread reply announcing the inquiry's state at its current version;
// owner as in RenderRoot.
func RenderReply(q *domain.Inquiry, clearance domain.Classification, owner slackinstall.Person) Rendered {
	fs := []string{"Status: " + statusFor(q, clearance)}
	for _, f := range cleared(clearance, []field{{"priority", "Priority", string(q.Priority)}, {"owner", "Owner", string(q.Owner)}}) {
		if f.name == "owner" {
			fs = append(fs, f.label+": "+ownerText(owner, clearance))
			continue
		}
		fs = append(fs, f.label+": "+slackinstall.FitEscaped(f.value, maxFieldText))
	}
	text := slackinstall.Fit(fmt.Sprintf("Update (version %d): %s", q.Version, strings.Join(fs, ", ")), slackinstall.MaxSectionText)
	return Rendered{Text: text, Blocks: []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil),
	}}
}
