package callbacks

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
	"github.com/slack-go/slack"
)

// openModal opens the modal of an assign, note or cancel button on the pool (the trigger id is
// valid for 3 s); the modal carries the root message's channel and ts.
func (h *Handler) openModal(w http.ResponseWriter, r *http.Request, in slackinstall.Installation, it Interaction) {
	reqID := requestID(w)
	ctx := context.WithoutCancel(r.Context())
	if !h.submit(func() {
		v := Modal(it.ActionID, it.Channel, it.RootTS)
		if versionChecked[v.CallbackID] && it.Version > 0 {
			v.PrivateMetadata += " v" + strconv.FormatUint(it.Version, 10)
		}
		if it.ActionID == ActionRemind {
			v = RemindModal(it.Channel, it.RootTS, h.zone(ctx, in.Tenant))
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := h.Store.Client(in).OpenViewContext(cctx, it.TriggerID, v); err != nil {
			h.log().WarnContext(ctx, "slack views.open failed", "request_id", reqID, "err", err)
			h.respond(ctx, reqID, it.ResponseURL, "Could not open the form; try again.")
		}
	}) {
		h.refuse(r.Context(), reqID, "interaction", "busy")
	}
	w.WriteHeader(http.StatusOK)
}

// Modal builds the modal an action opens.
func Modal(action, channel, rootTS string) slack.ModalViewRequest {
	txt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	var callback, title, label, input string
	// Slack allows max_length 1–3000 (slackinstall.MaxPlainTextInput): a longer domain limit is
	// declared as Slack's, and a longer submission is refused by the handler (noteTooLong).
	var el slack.BlockElement
	switch action {
	case ActionAssign:
		callback, title, label, input = ModalAssign, "Assign", "Owner", InputOwner
		el = slack.NewOptionsSelectBlockElement(slack.OptTypeUser, txt("Choose someone"), InputOwner)
	case ActionNote:
		callback, title, label, input = ModalNote, "Add note", "Note", InputNote
		e := slack.NewPlainTextInputBlockElement(txt("Internal note"), InputNote)
		e.Multiline, e.MaxLength = true, min(domain.MaxNoteLen, slackinstall.MaxPlainTextInput)
		el = e
	default:
		callback, title, label, input = ModalCancel, "Cancel inquiry", "Reason", InputReason
		e := slack.NewPlainTextInputBlockElement(txt("Why is it cancelled?"), InputReason)
		e.MaxLength = min(domain.MaxReasonLen, slackinstall.MaxPlainTextInput)
		el = e
	}
	return slack.ModalViewRequest{
		Type: slack.VTModal, Title: txt(slackinstall.Fit(title, slackinstall.MaxModalTitle)), Submit: txt("Save"), Close: txt("Close"),
		CallbackID: callback, PrivateMetadata: channel + " " + rootTS,
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock(input, txt(label), nil, el)}},
	}
}
