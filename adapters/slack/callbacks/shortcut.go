package callbacks

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// ShortcutCreateInquiry is the message shortcut "Create inquiry".
const ShortcutCreateInquiry = slackinstall.ShortcutCreateInquiry

// maxSubjectRunes is how much of a message's first line becomes the subject.
const maxSubjectRunes = 80

// shortcutKey is the intake's idempotency key: the installation, channel and message ts name the
// message, so a second shortcut on it (by anyone) finds the first inquiry and creates nothing.
func shortcutKey(installKey, channel, ts string) string {
	return "slack-message:" + installKey + "/" + channel + "/" + ts
}

// shortcut handles "Create inquiry" on a message: acknowledged at once; on the pool it resolves
// the user to a principal allowed to submit, fetches the message's permalink with the
// installation's bot token (chat.getPermalink), and records an inquiry with source slack whose
// requester is the message's author (the linked principal's name, else only the Slack user id; no
// email: Casebook does not read Slack profiles). The user gets an ephemeral answer through
// response_url with the receipt, or a note that the message already has one.
func (h *Handler) shortcut(w http.ResponseWriter, r *http.Request, in slackinstall.Installation, it Interaction) {
	reqID := requestID(w)
	ctx := context.WithoutCancel(r.Context())
	if it.ActionID != ShortcutCreateInquiry {
		h.refuse(ctx, reqID, "shortcut", "unknown_callback")
		w.WriteHeader(http.StatusOK)
		return
	}
	if !h.submit(func() {
		cctx, cancel := context.WithTimeout(ctx, commandTimeout)
		defer cancel()
		h.respond(cctx, reqID, it.ResponseURL, h.createFromMessage(cctx, reqID, in, it))
	}) {
		h.refuse(ctx, reqID, "shortcut", "busy")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// createFromMessage records the inquiry and returns the text for the user.
func (h *Handler) createFromMessage(ctx context.Context, reqID string, in slackinstall.Installation, it Interaction) string {
	actor, err := h.actor(ctx, reqID, "shortcut", in, it.UserID)
	if err == nil {
		err = domain.Authorize(actor, domain.ActSubmit)
	}
	if err != nil {
		return h.explain(ctx, in.Tenant, "", err)
	}
	if it.MessageUser == "" {
		return "Only messages written by people can become inquiries."
	}
	text := commands.Normalize(it.MessageText, true)
	subject := firstLine(text)
	if subject == "" {
		return "This message has no text to file."
	}
	link, err := h.Store.Client(in).GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: it.Channel, Ts: it.MessageTS})
	if err != nil {
		h.log().WarnContext(ctx, "slack chat.getPermalink failed", "request_id", reqID, "err", err)
		return "Could not reach Slack to link the message; nothing was created. Try again."
	}
	requester := domain.Requester{SlackUser: it.MessageUser}
	if pid, err := h.Store.LinkedPrincipal(ctx, in.Tenant, in.Key, it.MessageUser); err == nil {
		if p, err := h.Principals.Principal(ctx, in.Tenant, pid); err == nil {
			requester.Name = p.Name
		}
	}
	res, err := h.Commands.Intake(ctx, commands.Intake{
		Tenant: in.Tenant, Source: domain.SourceSlack, IdempotencyKey: shortcutKey(in.Key, it.Channel, it.MessageTS),
		Submitter: &actor, Requester: requester, Subject: subject, Message: domain.CutRunes(text, domain.MaxMessageLen),
		Permalink: link, CorrelationID: reqID,
	})
	var ve *domain.ValidationError
	switch {
	case err == nil && res.Replayed:
		return "This message already has an inquiry: " + res.Receipt + ". Nothing new was created."
	case err == nil:
		return "Inquiry " + res.Receipt + " created from this message."
	case errors.As(err, &ve):
		return "Not created: " + ve.Error() + "."
	}
	return h.explain(ctx, in.Tenant, "", err)
}

// firstLine is the first line of text with words, cut to maxSubjectRunes.
func firstLine(text string) string {
	for line := range strings.SplitSeq(text, "\n") {
		if line = strings.Join(strings.Fields(line), " "); domain.Visible(line) {
			if utf8.RuneCountInString(line) > maxSubjectRunes {
				return domain.CutRunes(line, maxSubjectRunes-1) + "…"
			}
			return line
		}
	}
	return ""
}
