package callbacks

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// The "Remind me" modal: the root's ActionRemind button opens it; its submission schedules a
// follow-up through the same command as POST /v1/inquiries/{id}/follow-ups, as the clicking user's
// principal (who is then one of the reminder's recipients, with the owner and the watchers).
const (
	ModalRemind = "casebook_remind_modal"
	InputWhen   = "when" // radio_buttons: WhenInHour, WhenTomorrow or WhenCustom
	InputAt     = "at"   // datetimepicker (WhenCustom): Unix seconds, chosen in the user's own zone
	InputRemind = "remind_note"

	WhenInHour   = "in_1h"
	WhenTomorrow = "tomorrow_9" // 9:00 tomorrow in the tenant's time zone (its SLA policy's; else UTC)
	WhenCustom   = "custom"
)

// zone is the tenant's time zone: its SLA policy's, else UTC (no policy, or it cannot be read:
// the modal says which zone it means, so a fallback is visible).
func (h *Handler) zone(ctx context.Context, tenant domain.TenantID) *time.Location {
	if h.Policy == nil {
		return time.UTC
	}
	p, err := h.Policy(ctx, tenant)
	if err != nil || p == nil {
		return time.UTC
	}
	loc, err := time.LoadLocation(p.TimeZone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// RemindModal builds the "Remind me" modal; loc names the zone of "tomorrow 9:00".
func RemindModal(channel, rootTS string, loc *time.Location) slack.ModalViewRequest {
	txt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	opt := func(v, label string) *slack.OptionBlockObject { return slack.NewOptionBlockObject(v, txt(label), nil) }
	in1h := opt(WhenInHour, "In 1 hour")
	when := slack.NewRadioButtonsBlockElement(InputWhen, in1h, opt(WhenTomorrow, "Tomorrow at 9:00 ("+loc.String()+")"),
		opt(WhenCustom, "At the date and time below"))
	when.InitialOption = in1h
	at := slack.NewInputBlock(InputAt, txt("Date and time"), txt("Only for the last choice; in your own time zone"), slack.NewDateTimePickerBlockElement(InputAt))
	at.Optional = true
	noteEl := slack.NewPlainTextInputBlockElement(txt("What to remember"), InputRemind)
	noteEl.Multiline, noteEl.MaxLength = true, domain.MaxFollowUpNoteLen
	note := slack.NewInputBlock(InputRemind, txt("Note"), nil, noteEl)
	note.Optional = true
	return slack.ModalViewRequest{
		Type: slack.VTModal, Title: txt("Remind me"), Submit: txt("Save"), Close: txt("Close"),
		CallbackID: ModalRemind, PrivateMetadata: channel + " " + rootTS,
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock(InputWhen, txt("When"), nil, when), at, note}},
	}
}

// remind maps a Remind me submission to the follow-up command; field names the input a refusal
// belongs to.
func (h *Handler) remind(ctx context.Context, in slackinstall.Installation, it Interaction) (runFunc, string, error) {
	c := commands.ScheduleFollowUp{Note: it.Inputs[InputRemind]}
	switch it.Inputs[InputWhen] {
	case WhenInHour:
		c.In = time.Hour
	case WhenTomorrow:
		now := h.now().In(h.zone(ctx, in.Tenant))
		c.At = time.Date(now.Year(), now.Month(), now.Day()+1, 9, 0, 0, 0, now.Location())
	case WhenCustom:
		secs, err := strconv.ParseInt(it.Inputs[InputAt], 10, 64)
		if err != nil || secs <= 0 {
			return nil, InputAt, domain.Invalid("at", "choose a date and time")
		}
		c.At = time.Unix(secs, 0).UTC()
	default:
		return nil, InputWhen, domain.Invalid("when", "choose when to be reminded")
	}
	field := InputWhen // a refusal (a time in the past, too far ahead) belongs to the choice made
	if it.Inputs[InputWhen] == WhenCustom {
		field = InputAt
	}
	return func(ctx context.Context, t commands.Target) (string, error) {
		c.Target = t
		res, err := h.Commands.ScheduleFollowUp(ctx, c)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("I'll remind you <!date^%d^{date_short_pretty} at {time}|%s>.", res.DueAt.Unix(), res.DueAt.UTC().Format("2006-01-02 15:04 UTC")), nil
	}, field, nil
}
