package callbacks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// Interactions serves block_actions and view_submission payloads.
func (h *Handler) Interactions(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readVerified(w, r, "interaction")
	if !ok {
		return
	}
	it, err := ParseInteraction(body)
	if err != nil {
		h.refuse(r.Context(), requestID(w), "interaction", "malformed")
		http.Error(w, "malformed payload", http.StatusBadRequest)
		return
	}
	kind := "interaction"
	if it.Type == "message_action" {
		kind = "shortcut"
	}
	in, ok := h.bind(w, r, body, it.InstallKey(), kind, it.UserID)
	if !ok {
		return
	}
	if it.Type == "message_action" {
		h.shortcut(w, r, in, it)
		return
	}
	ctx, reqID := r.Context(), requestID(w)
	actor, err := h.actor(ctx, reqID, "interaction", in, it.UserID)
	if err != nil {
		h.answer(w, r, it, "", h.explain(ctx, in.Tenant, "", err))
		return
	}
	id, err := h.Threads.ThreadByRoot(ctx, in.Tenant, in.Key, it.Channel, it.RootTS)
	if err != nil {
		if errors.Is(err, domain.ErrNotFound) {
			h.refuseAudited(ctx, reqID, "interaction", RefusedUnknownThread, in.Tenant, actor.ID, "")
		}
		h.answer(w, r, it, "", h.explain(ctx, in.Tenant, "", err))
		return
	}
	if it.Version > 0 && versionChecked[it.ActionID] && h.stale(ctx, reqID, in.Tenant, id, it.Version) {
		h.refuseAudited(ctx, reqID, "interaction", RefusedStale, in.Tenant, actor.ID, id)
		h.answer(w, r, it, "", h.explain(ctx, in.Tenant, id, domain.ErrConcurrency))
		return
	}
	if it.Type == "block_actions" {
		switch it.ActionID {
		case ActionAssign, ActionNote, ActionCancel, ActionRemind:
			h.openModal(w, r, in, it)
			return
		}
	}
	cmd, field, err := h.command(ctx, in, it)
	if err != nil {
		h.answer(w, r, it, field, h.explain(ctx, in.Tenant, id, err))
		return
	}
	t := commands.Target{Tenant: in.Tenant, InquiryID: id, Actor: actor, IdempotencyKey: idempotencyKey(in.Key, it), CorrelationID: reqID}
	done := make(chan outcome, 1)
	run := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
		defer cancel()
		text, err := cmd(cctx, t)
		if err != nil {
			text = h.explain(cctx, in.Tenant, id, err)
		}
		done <- outcome{text, err == nil}
		if it.Type == "block_actions" {
			h.respond(cctx, reqID, it.ResponseURL, text)
		}
	}
	if !h.submit(run) {
		h.refuse(ctx, reqID, "interaction", "busy")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	if it.Type == "block_actions" {
		w.WriteHeader(http.StatusOK) // the result goes to response_url
		return
	}
	budget := h.AckBudget
	if budget <= 0 {
		budget = DefaultAckBudget
	}
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case o := <-done:
		if o.ok {
			w.WriteHeader(http.StatusOK) // closes the modal; the thread shows the change
			return
		}
		h.answer(w, r, it, field, o.text)
	case <-timer.C:
		w.WriteHeader(http.StatusOK) // still running: the thread shows it when it lands
	}
}

type outcome struct {
	text string
	ok   bool
}

type runFunc func(ctx context.Context, t commands.Target) (string, error)

// command maps an interaction to a command; field names the modal input a refusal belongs to.
func (h *Handler) command(ctx context.Context, in slackinstall.Installation, it Interaction) (runFunc, string, error) {
	c := h.Commands
	switch it.ActionID {
	case ActionClaim:
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.Claim(ctx, commands.Claim{Target: t})
			return "You claimed this inquiry.", err
		}, "", nil
	case ActionResolve:
		return transition(c, domain.StatusResolved), "", nil
	case ActionStatus:
		to, err := domain.ParseStatus("status", it.Value)
		if err != nil {
			return nil, "", err
		}
		return transition(c, to), "", nil
	case ActionAssignMe:
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.Assign(ctx, commands.Assign{Target: t, Owner: t.Actor.ID})
			return "Assigned to you.", err
		}, "", nil
	case ModalAssign:
		owner, err := h.Store.LinkedPrincipal(ctx, in.Tenant, in.Key, it.Inputs[InputOwner])
		if err != nil {
			return nil, InputOwner, domain.Invalid("owner", "that Slack user is not linked to Casebook")
		}
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.Assign(ctx, commands.Assign{Target: t, Owner: owner})
			return "Assigned.", err
		}, InputOwner, nil
	case ModalNote:
		body := it.Inputs[InputNote]
		if utf8.RuneCountInString(body) > slackinstall.MaxPlainTextInput {
			return nil, InputNote, domain.Invalid("note", "a note from Slack is at most %d characters; add a longer one in the console", slackinstall.MaxPlainTextInput)
		}
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.AddNote(ctx, commands.AddNote{Target: t, Body: body})
			return "Note added.", err
		}, InputNote, nil
	case ModalRemind:
		return h.remind(ctx, in, it)
	case ModalCancel:
		reason := it.Inputs[InputReason]
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.Cancel(ctx, commands.Cancel{Target: t, Reason: reason})
			return "Cancelled.", err
		}, InputReason, nil
	}
	return nil, "", domain.Invalid("action", "unknown action")
}

func transition(c commands.Executor, to domain.Status) runFunc {
	return func(ctx context.Context, t commands.Target) (string, error) {
		_, err := c.Transition(ctx, commands.Transition{Target: t, To: to})
		return "Moved to " + string(to) + ".", err
	}
}

// idempotencyKey derives a command's key from the delivery: installation, the action's own
// timestamp (or the modal's view id) and action id, so a repeated delivery is one command.
func idempotencyKey(installKey string, it Interaction) string {
	once := it.ActionTS
	if it.Type == "view_submission" {
		once = it.ViewID
	}
	if once == "" {
		once = it.TriggerID
	}
	sum := sha256.Sum256([]byte(installKey + "\x00" + it.Type + "\x00" + once + "\x00" + it.ActionID + "\x00" + it.Value))
	return "slack:" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20])
}

// explain turns a refusal into what the Slack user sees; internal errors are logged, not shown.
func (h *Handler) explain(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, err error) string {
	var claimed *domain.ClaimedError
	var ve *domain.ValidationError
	var rl *domain.RateLimitError
	switch {
	case errors.As(err, &claimed):
		return "Already claimed by " + h.name(ctx, tenant, claimed.Owner) + "."
	case errors.Is(err, domain.ErrErased):
		return "This inquiry was erased; nothing was done."
	case errors.Is(err, domain.ErrArchived):
		return "This inquiry is archived; nothing was done. Unarchive it in Casebook to work on it."
	case errors.Is(err, domain.ErrConcurrency), errors.Is(err, domain.ErrInvalidTransition):
		return "This inquiry was changed" + h.current(ctx, tenant, id) + " — refresh and try again."
	case errors.Is(err, domain.ErrUnauthenticated):
		return "Your Slack account is not linked to Casebook. Ask an admin to run `casebook slack link-user`."
	case errors.Is(err, domain.ErrPrincipalDisabled):
		return "Your Casebook account is disabled; nothing was done. Ask an admin of your Casebook tenant."
	case errors.Is(err, domain.ErrNotFound):
		return "This inquiry is not available here."
	case errors.Is(err, domain.ErrForbidden):
		return "Your role or team does not allow this."
	case errors.Is(err, domain.ErrIdempotencyMismatch):
		return "This action was already used for something else; refresh and try again."
	case errors.As(err, &ve):
		return "Not done: " + ve.Error() + "."
	case errors.As(err, &rl):
		return "Not done: " + rl.Error() + "."
	}
	h.log().ErrorContext(ctx, "slack command failed", "tenant", string(tenant), "inquiry", string(id), "err", err)
	return "Something went wrong; try again."
}

func (h *Handler) name(ctx context.Context, tenant domain.TenantID, id domain.PrincipalID) string {
	if p, err := h.Principals.Principal(ctx, tenant, id); err == nil && p.Name != "" {
		return p.Name
	}
	return "someone else"
}

// current explains a stale click: " by {last actor} (now {status}, owned by {owner})". The actor
// is named only when the query model has caught up with the aggregate (else it might not be the
// one who changed it) and is a principal of the tenant: never the requester or a system source.
func (h *Handler) current(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) string {
	if id == "" {
		return ""
	}
	var s string
	var version uint64
	if h.Load != nil {
		if q, err := h.Load(ctx, tenant, id); err == nil && q.Exists() {
			version = q.Version
			s = " (now " + string(q.Status)
			if q.Owner != "" {
				s += ", owned by " + h.name(ctx, tenant, q.Owner)
			}
			s += ")"
		}
	}
	if by := h.lastActor(ctx, tenant, id, version); by != "" {
		s = " by " + by + s
	}
	return s
}

// lastActor is the display name of the principal behind the timeline's last entry, if that entry
// is at version (when known) and its actor is a principal of tenant; else "".
func (h *Handler) lastActor(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, version uint64) string {
	if h.History == nil {
		return ""
	}
	last, err := h.History.LastTimelineEntry(ctx, tenant, id)
	if err != nil {
		return ""
	}
	if (version != 0 && last.Version != version) || last.Actor == "" {
		return ""
	}
	p, err := h.Principals.Principal(ctx, tenant, last.Actor)
	if err != nil || p.TenantID != tenant {
		return ""
	}
	return p.Name
}

// answer tells the user why nothing happened: in the modal (view_submission) or through
// response_url (block_actions).
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, it Interaction, field, text string) {
	if it.Type == "view_submission" {
		if field == "" {
			field = map[string]string{ModalAssign: InputOwner, ModalNote: InputNote, ModalCancel: InputReason, ModalRemind: InputWhen}[it.ActionID]
		}
		writeJSON(w, map[string]any{"response_action": "errors", "errors": map[string]string{field: text}})
		return
	}
	reqID := requestID(w)
	url := it.ResponseURL
	if !h.submit(func() { h.respond(context.WithoutCancel(r.Context()), reqID, url, text) }) {
		h.refuse(r.Context(), reqID, "interaction", "busy")
	}
	w.WriteHeader(http.StatusOK)
}

// respond posts an ephemeral message to response_url, which must carry ResponseURLPrefix.
func (h *Handler) respond(ctx context.Context, reqID, url, text string) {
	prefix := h.ResponseURLPrefix
	if prefix == "" {
		prefix = DefaultResponseURLPrefix
	}
	if url == "" || !strings.HasPrefix(url, prefix) {
		h.refuse(ctx, reqID, "interaction", "response_url_not_allowed")
		return
	}
	b, _ := json.Marshal(map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	client := h.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	res, err := client.Do(req)
	if err != nil {
		h.log().WarnContext(ctx, "slack response_url failed", "request_id", reqID, "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
	_ = res.Body.Close()
}
