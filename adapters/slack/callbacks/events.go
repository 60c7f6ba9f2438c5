package callbacks

import (
	"context"
	"net/http"
)

// Events serves the Events API: url_verification, and app_uninstalled / tokens_revoked, which
// disable the installation. Deliveries are deduplicated by event id.
func (h *Handler) Events(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readVerified(w, r, "event")
	if !ok {
		return
	}
	ev, err := ParseEvent(body)
	if err != nil {
		h.refuse(r.Context(), requestID(w), "event", "malformed")
		http.Error(w, "malformed payload", http.StatusBadRequest)
		return
	}
	if ev.Type == "url_verification" {
		writeJSON(w, map[string]string{"challenge": ev.Challenge})
		return
	}
	in, ok := h.bind(w, r, body, ev.InstallKey(), "event", "")
	if !ok {
		return
	}
	ctx := r.Context()
	key := in.Key + "/" + ev.EventID
	fresh, err := h.Seen.Claim(ctx, key)
	if err != nil {
		h.log().ErrorContext(ctx, "slack event dedupe", "request_id", requestID(w), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if !fresh {
		h.log().InfoContext(ctx, "slack event duplicate", "request_id", requestID(w), "retry_num", r.Header.Get("X-Slack-Retry-Num"))
		w.WriteHeader(http.StatusOK)
		return
	}
	if ev.EventType == "app_uninstalled" || (ev.EventType == "tokens_revoked" && ev.BotTokensRevoked) {
		err := h.Guard.DisableInstallation(ctx, in.Tenant, in.Key, ev.EventType)
		if err == nil {
			err = h.Store.RecordDisabled(ctx, in.Tenant, in.Key, ev.EventType, ev.EventID)
		}
		if err != nil {
			_ = h.Seen.Release(context.WithoutCancel(ctx), key)
			h.log().ErrorContext(ctx, "slack disable installation", "request_id", requestID(w), "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		h.log().WarnContext(ctx, "slack installation disabled", "request_id", requestID(w), "tenant", string(in.Tenant), "reason", ev.EventType)
	}
	w.WriteHeader(http.StatusOK)
}
