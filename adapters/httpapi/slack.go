package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/queries"
)

// Slack is what the Slack routes need: effect jobs and per-inquiry projection health, always
// within the caller's tenant (another tenant's job is domain.ErrNotFound).
type Slack interface {
	// ListEffects lists every effect kind's jobs; empty filters select all.
	ListEffects(ctx context.Context, tenant domain.TenantID, f EffectFilter) (any, error)
	RetryEffect(ctx context.Context, tenant domain.TenantID, id int64) (any, error)
	CancelEffect(ctx context.Context, tenant domain.TenantID, id int64) (any, error)
	// SlackHealth is an inquiry's "slack" block: state pending, synced, failed or disabled. has
	// is what Slack state the inquiry has (queries.Detail): parts it has none of are not read.
	SlackHealth(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, has queries.SlackPresence) (any, error)
	// ListStatuses is every List projection of the tenant: activation, schema, cooldown, circuit,
	// watermarks and the last reconcile run.
	ListStatuses(ctx context.Context, tenant domain.TenantID) (any, error)
}

// EffectFilter is GET /v1/admin/effects' query: state, kind (comma-separated) and inquiry.
type EffectFilter struct {
	States  []string
	Kinds   []string
	Inquiry domain.InquiryID
}

func (s *Server) slackAdminRoutes(a *mux.Router) {
	a.HandleFunc("/effects", s.listEffects).Methods(http.MethodGet)
	a.HandleFunc("/effects/{id}/retry", s.effectOp(true)).Methods(http.MethodPost)
	a.HandleFunc("/effects/{id}/cancel", s.effectOp(false)).Methods(http.MethodPost)
	a.HandleFunc("/lists", s.listLists).Methods(http.MethodGet)
}

func (s *Server) listLists(w http.ResponseWriter, r *http.Request) {
	if s.Slack == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return
	}
	items, err := s.Slack.ListStatuses(r.Context(), principal(r).TenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) listEffects(w http.ResponseWriter, r *http.Request) {
	if s.Slack == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return
	}
	var f EffectFilter
	q := r.URL.Query()
	if v := q.Get("state"); v != "" {
		f.States = strings.Split(v, ",")
	}
	if v := q.Get("kind"); v != "" {
		f.Kinds = strings.Split(v, ",")
	}
	f.Inquiry = domain.InquiryID(q.Get("inquiry"))
	items, err := s.Slack.ListEffects(r.Context(), principal(r).TenantID, f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) effectOp(retry bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.Slack == nil {
			s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
			return
		}
		id, err := strconv.ParseInt(mux.Vars(r)["id"], 10, 64)
		if err != nil {
			s.writeError(w, r, domain.ErrNotFound)
			return
		}
		op := s.Slack.CancelEffect
		if retry {
			op = s.Slack.RetryEffect
		}
		out, err := op(r.Context(), principal(r).TenantID, id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// withSlack adds the inquiry's Slack projection health to a detail view.
func (s *Server) withSlack(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, has queries.SlackPresence, detail any) any {
	if s.Slack == nil {
		return detail
	}
	h, err := s.Slack.SlackHealth(ctx, tenant, id, has)
	if err != nil {
		s.logger().WarnContext(ctx, "slack health unavailable", "err", err)
		h = map[string]string{"state": "unknown"}
	}
	d, err := json.Marshal(detail)
	if err != nil || len(d) < 2 || d[len(d)-1] != '}' {
		return detail
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return detail
	}
	sep := ","
	if len(d) == 2 {
		sep = ""
	}
	return json.RawMessage(string(d[:len(d)-1]) + sep + `"slack":` + string(hb) + "}")
}
