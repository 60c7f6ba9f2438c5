package callbacks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// refuse logs a refused callback with the request id and a reason code only: no user, channel,
// workspace or message content.
func (h *Handler) refuse(ctx context.Context, reqID, kind, reason string) {
	h.log().WarnContext(ctx, "slack callback refused", "request_id", reqID, "kind", kind, "reason", reason)
}

// Reason codes of the refusals audited before the command layer.
const (
	RefusedUnknownInstallation = "unknown_installation"
	RefusedAnotherWorkspace    = "another_workspace" // signed by another installation's secret
	RefusedUnlinkedUser        = "unlinked_user"
	RefusedPrincipalDisabled   = "principal_disabled"
	RefusedUnknownThread       = "unknown_thread"   // a root Casebook did not post in this installation
	RefusedStale               = "version_mismatch" // a click on a message rendered at an older version
)

// versionChecked are the elements refused when clicked on a message older than the inquiry: those
// that change (or open a form to change) its state or owner, as the HTTP API refuses a stale
// If-Match; and the assign and cancel forms, which carry the version of the message they were
// opened from, so a change made while the form was open is not overwritten. "Add note" and
// "Remind me" add to the inquiry whatever its state and stay usable on an older message. Elements
// (and forms) without a version, rendered before versions were carried, are taken as before.
var versionChecked = map[string]bool{ActionClaim: true, ActionResolve: true, ActionAssignMe: true, ActionStatus: true,
	ActionAssign: true, ActionCancel: true, ModalAssign: true, ModalCancel: true}

// stale reports whether the inquiry has moved past the version a clicked message was rendered at;
// if so it queues the message's re-render at the current version. Without Load nothing is stale.
func (h *Handler) stale(ctx context.Context, reqID string, tenant domain.TenantID, id domain.InquiryID, version uint64) bool {
	if h.Load == nil {
		return false
	}
	q, err := h.Load(ctx, tenant, id)
	if err != nil || !q.Exists() || q.Version <= version {
		return false // a load error leaves the decision to the command, which reads the stream itself
	}
	if h.Refresh != nil {
		if err := h.Refresh(context.WithoutCancel(ctx), tenant, id, q.Version); err != nil {
			h.log().ErrorContext(ctx, "slack refresh not queued", "request_id", reqID, "err", err)
		}
	}
	return true
}

// refuseAudited logs a refusal like refuse and records it in the command audit as command
// "slack_{kind}", outcome refused, code reason: tenant is "" when no installation matched; actor
// is the principal when known, else "slack:{user id}" (an id; never a name, email or message).
func (h *Handler) refuseAudited(ctx context.Context, reqID, kind, reason string, tenant domain.TenantID, actor domain.PrincipalID, id domain.InquiryID) {
	h.refuse(ctx, reqID, kind, reason)
	if h.Audit == nil {
		return
	}
	e := commands.AuditEntry{RequestID: reqID, Tenant: tenant, Actor: actor, Command: "slack_" + kind, InquiryID: id,
		Outcome: commands.OutcomeRefused, Code: reason, At: h.now().UTC()}
	if err := h.Audit.Record(context.WithoutCancel(ctx), e); err != nil {
		h.log().ErrorContext(ctx, "audit write failed", "request_id", reqID, "command", e.Command, "err", err)
	}
}

// slackActor names an unresolved Slack user in the audit.
func slackActor(user string) domain.PrincipalID {
	if user == "" {
		return "slack:unknown"
	}
	return domain.PrincipalID("slack:" + user)
}

func requestID(w http.ResponseWriter) string {
	if id := w.Header().Get("X-Request-Id"); id != "" {
		return id
	}
	return "slack"
}

// readVerified reads the exact body (bounded) and verifies it against every active
// installation's signing secret before anything in it is looked at.
func (h *Handler) readVerified(w http.ResponseWriter, r *http.Request, kind string) ([]byte, bool) {
	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "could not read body", http.StatusBadRequest)
		return nil, false
	}
	sigs, err := h.Store.SigningSecrets(r.Context())
	if err != nil {
		h.log().ErrorContext(r.Context(), "slack signing secrets", "request_id", requestID(w), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return nil, false
	}
	secrets := make([]string, len(sigs))
	for i, s := range sigs {
		secrets[i] = s.Secret
	}
	if _, err := Verify(r.Header, body, h.now(), secrets); err != nil {
		reason := "bad_signature"
		if errors.Is(err, ErrStale) {
			reason = "stale_timestamp"
		}
		h.refuse(r.Context(), requestID(w), kind, reason)
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

// bind finds the installation the verified payload names and checks that its own signing secret
// signed the body, so one app's secret cannot speak for another installation. user is the Slack
// user the payload names ("" for events), for the audit.
func (h *Handler) bind(w http.ResponseWriter, r *http.Request, body []byte, key, kind, user string) (slackinstall.Installation, bool) {
	in, secret, err := h.Store.InstallationByKey(r.Context(), key)
	if errors.Is(err, domain.ErrNotFound) {
		h.refuseAudited(r.Context(), requestID(w), kind, RefusedUnknownInstallation, "", slackActor(user), "")
		w.WriteHeader(http.StatusOK) // nothing to retry
		return in, false
	}
	if err != nil {
		h.log().ErrorContext(r.Context(), "slack installation lookup", "request_id", requestID(w), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return in, false
	}
	if _, err := Verify(r.Header, body, h.now(), []string{secret}); err != nil {
		h.refuseAudited(r.Context(), requestID(w), kind, RefusedAnotherWorkspace, in.Tenant, slackActor(user), "")
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return in, false
	}
	return in, true
}

// actor resolves a Slack user of the installation to an enabled principal of its tenant, read
// afresh on every request. An unlinked user (or one whose principal is gone) and a disabled
// principal are refused here, before any command, and the refusal audited.
func (h *Handler) actor(ctx context.Context, reqID, kind string, in slackinstall.Installation, slackUser string) (domain.Principal, error) {
	pid, err := h.Store.LinkedPrincipal(ctx, in.Tenant, in.Key, slackUser)
	if errors.Is(err, domain.ErrNotFound) {
		h.refuseAudited(ctx, reqID, kind, RefusedUnlinkedUser, in.Tenant, slackActor(slackUser), "")
		return domain.Principal{}, fmt.Errorf("slack user not linked: %w", domain.ErrUnauthenticated)
	}
	if err != nil {
		return domain.Principal{}, err
	}
	p, err := h.Principals.Principal(ctx, in.Tenant, pid)
	if errors.Is(err, domain.ErrNotFound) {
		h.refuseAudited(ctx, reqID, kind, RefusedUnlinkedUser, in.Tenant, slackActor(slackUser), "")
		return domain.Principal{}, fmt.Errorf("slack user's principal is gone: %w", domain.ErrUnauthenticated)
	}
	if err == nil && p.Disabled {
		h.refuseAudited(ctx, reqID, kind, RefusedPrincipalDisabled, in.Tenant, p.ID, "")
		return domain.Principal{}, fmt.Errorf("slack user's principal: %w", domain.ErrPrincipalDisabled)
	}
	return p, err
}
