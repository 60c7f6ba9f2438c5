package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/domain"
)

// SlackOAuth is the OAuth v2 install flow of a distributed Slack app.
type SlackOAuth interface {
	Enabled() bool
	// Start returns the authorize URL, with a state bound to tenant.
	Start(ctx context.Context, tenant domain.TenantID) (string, error)
	// Callback completes the install for the tenant the state is bound to.
	Callback(ctx context.Context, code, state string) error
}

// slackOAuthRoutes: start is an admin's (bearer token); the callback is Slack's redirect of the
// admin's browser, authenticated by the single-use state alone.
func (s *Server) slackOAuthRoutes(r *mux.Router) {
	st := r.PathPrefix("/slack/oauth/start").Subrouter()
	st.Use(s.authenticate, s.requireAdminOnly)
	st.HandleFunc("", s.slackOAuthStart).Methods(http.MethodGet)
	r.HandleFunc("/slack/oauth/callback", s.slackOAuthCallback).Methods(http.MethodGet)
}

func (s *Server) requireAdminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := domain.Authorize(principal(r), domain.ActAdminister); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) oauthOff(w http.ResponseWriter, r *http.Request) bool {
	if s.SlackOAuth == nil || !s.SlackOAuth.Enabled() {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "Slack OAuth install is not configured"})
		return true
	}
	return false
}

func (s *Server) slackOAuthStart(w http.ResponseWriter, r *http.Request) {
	if s.oauthOff(w, r) {
		return
	}
	u, err := s.SlackOAuth.Start(r.Context(), principal(r).TenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", u)
	writeJSON(w, http.StatusSeeOther, map[string]string{"authorize_url": u})
}

func (s *Server) slackOAuthCallback(w http.ResponseWriter, r *http.Request) {
	if s.oauthOff(w, r) {
		return
	}
	q := r.URL.Query()
	if q.Get("error") != "" {
		s.writeError(w, r, &apiError{http.StatusBadRequest, "install_cancelled", "the install was not approved in Slack"})
		return
	}
	if err := s.SlackOAuth.Callback(r.Context(), q.Get("code"), q.Get("state")); err != nil {
		if errors.Is(err, domain.ErrValidation) || errors.Is(err, domain.ErrConflict) {
			s.writeError(w, r, err)
			return
		}
		// Forged, expired, replayed or unknown states and failed exchanges look alike from outside.
		s.logger().WarnContext(r.Context(), "slack oauth callback refused", "request_id", requestID(r.Context()), "err", err)
		s.writeError(w, r, &apiError{http.StatusBadRequest, "install_failed", "the install link is invalid or expired; start again"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "installed"})
}
