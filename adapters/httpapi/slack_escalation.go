package httpapi

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/domain"
)

// SlackEscalation is the tenant's escalation destination: the Slack channel each escalation is
// posted to. Every change is recorded with the acting principal (installation audit stream).
type SlackEscalation interface {
	// EscalationDestination is domain.ErrNotFound when the tenant has none.
	EscalationDestination(ctx context.Context, tenant domain.TenantID) (any, error)
	SetEscalationDestination(ctx context.Context, actor domain.Principal, channel, clearance string) (any, error)
	ClearEscalationDestination(ctx context.Context, actor domain.Principal) error
}

func (s *Server) slackEscalationRoutes(a *mux.Router) {
	a.HandleFunc("/slack/escalation", s.getEscalation).Methods(http.MethodGet)
	a.HandleFunc("/slack/escalation", s.putEscalation).Methods(http.MethodPut)
	a.HandleFunc("/slack/escalation", s.deleteEscalation).Methods(http.MethodDelete)
}

func (s *Server) escalationMissing(w http.ResponseWriter, r *http.Request) bool {
	if s.SlackEscalation == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return true
	}
	return false
}

func (s *Server) getEscalation(w http.ResponseWriter, r *http.Request) {
	if s.escalationMissing(w, r) {
		return
	}
	d, err := s.SlackEscalation.EscalationDestination(r.Context(), principal(r).TenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) putEscalation(w http.ResponseWriter, r *http.Request) {
	if s.escalationMissing(w, r) {
		return
	}
	var in struct {
		Channel   string `json:"channel"`
		Clearance string `json:"clearance"`
	}
	if err := decode(w, r, MaxOperatorBody, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.SlackEscalation.SetEscalationDestination(r.Context(), principal(r), in.Channel, in.Clearance)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) deleteEscalation(w http.ResponseWriter, r *http.Request) {
	if s.escalationMissing(w, r) {
		return
	}
	if err := s.SlackEscalation.ClearEscalationDestination(r.Context(), principal(r)); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
