package reminders

import (
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

// Rendered is a message ready for chat.postMessage: the notification text (redacted like the
// blocks) and its blocks.
type Rendered struct {
	Text   string
	Blocks []slack.Block
}

// Recipient is someone a reminder is for: their linked Slack user, else their display name
// (the one rule of slackinstall.Person).
type Recipient = slackinstall.Person

// escape neutralises Slack mrkdwn control characters in user-supplied text.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackDate renders t with Slack's date token, shown in each reader's own time zone; the
// fallback is UTC.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// addressed names the recipients as a destination of clearance may see them: nobody where the
// owner and watchers are not cleared; a linked Slack user by mention; an unlinked one by name only
// where personal data is cleared (a display name is personal), else counted.
func addressed(clearance domain.Classification, rs []Recipient) string {
	if !domain.Cleared("owner", clearance) || !domain.Cleared("watchers", clearance) {
		return ""
	}
	var parts []string
	unnamed := 0
	for _, r := range rs {
		if t := r.Text(clearance); t != "" {
			parts = append(parts, t)
		} else {
			unnamed++
		}
	}
	if unnamed > 0 {
		parts = append(parts, fmt.Sprintf("%d without a linked Slack account", unnamed))
	}
	return strings.Join(parts, ", ")
}

func targetName(t string) string { return strings.ReplaceAll(t, "_", " ") }

// RenderReminder renders the thread reply for a due event (FollowUpDue, SLAWarning, SLABreached)
// at a destination of clearance. note is the follow-up's note, shown only where cleared.
func RenderReminder(ev domain.Event, clearance domain.Classification, rs []Recipient, note string) Rendered {
	var head string
	switch e := ev.(type) {
	case domain.FollowUpDue:
		head = "Follow-up due"
		if domain.Cleared("due_at", clearance) {
			head += " (set for " + slackDate(e.DueAt) + ")"
		}
	case domain.SLAWarning:
		head = "SLA warning: the " + targetName(e.Target) + " target is due " + slackDate(e.DueAt)
	case domain.SLABreached:
		head = "SLA breached: the " + targetName(e.Target) + " target was due " + slackDate(e.DueAt)
	}
	text := head
	if to := addressed(clearance, rs); to != "" {
		text += " — " + to
	}
	body := text
	if note != "" && domain.Cleared("follow_up.note", clearance) {
		body += "\n>" + strings.ReplaceAll(escape(note), "\n", "\n>")
	}
	return Rendered{Text: text, Blocks: []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, body, false, false), nil, nil),
	}}
}

// RenderEscalation renders the escalation post of inquiry q (at its escalation) for a
// destination of clearance: every line passes the one redaction policy; link is the console's
// authenticated link ("" omits it).
func RenderEscalation(q *domain.Inquiry, e domain.InquiryEscalated, clearance domain.Classification, owner []Recipient, link string) Rendered {
	title := "Escalated: inquiry " + q.Receipt
	var lines []string
	add := func(field, label, value string) {
		if value != "" && domain.Cleared(field, clearance) {
			lines = append(lines, "*"+label+":* "+value)
		}
	}
	reason := fmt.Sprintf("level %d", e.Level)
	if e.Target != "" {
		reason += ", the " + targetName(e.Target) + " target was breached"
	}
	add("escalation", "Escalation", reason)
	if domain.Cleared("status", clearance) {
		add("status", "Status", string(q.Status))
	} else {
		add("status.coarse", "State", map[bool]string{true: "closed", false: "open"}[q.Status.Terminal()])
	}
	add("priority", "Priority", escape(string(q.Priority)))
	add("category", "Category", escape(q.Category))
	add("team", "Team", escape(q.Team))
	if to := addressed(clearance, owner); to != "" {
		add("owner", "Owner", to)
	}
	add("requester.name", "From", escape(q.Requester.Name))
	add("subject", "Subject", escape(q.Subject))
	if link != "" && domain.Cleared("link", clearance) {
		lines = append(lines, "<"+link+"|Open in Casebook>")
	}
	text := title
	if domain.Cleared("escalation", clearance) {
		text += fmt.Sprintf(" (level %d)", e.Level)
	}
	return Rendered{Text: text, Blocks: []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*"+escape(title)+"*\n"+strings.Join(lines, "\n"), false, false), nil, nil),
	}}
}
