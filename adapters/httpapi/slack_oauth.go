package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/domain"
)

// SlackOAuth is the OAuth v2 install flow of a distributed Slack app.
type SlackOAuth interface {
	Enabled() bool
	// InstallLink mints a one-time, expiring install link for tenant; by names who asked.
	InstallLink(ctx context.Context, tenant domain.TenantID, by string) (link string, expires time.Time, err error)
	// OpenLink uses a link's token up and returns Slack's authorize URL, its state bound to the
	// browser holding browserNonce.
	OpenLink(ctx context.Context, token, browserNonce string) (string, error)
	// NewBrowserNonce returns a value for the browser cookie.
	NewBrowserNonce() string
	// Callback completes the install for the tenant the state is bound to, in the browser holding
	// browserNonce.
	Callback(ctx context.Context, code, state, browserNonce string) error
	// SecureCookies reports whether the browser cookie is Secure (Casebook's public URL is https).
	SecureCookies() bool
	// CallbackPath is the path of the redirect URL Slack sends the browser back to: the only path
	// the browser cookie is sent to.
	CallbackPath() string
}

// slackBrowserCookie binds an install to the browser that opened its link (slackinstall.BrowserCookie).
const slackBrowserCookie = "casebook_slack_install"

// slackOAuthRoutes: start is an admin's (bearer token) and mints an install link; the link is
// opened in the admin's browser, which gets the binding cookie and goes on to Slack; the callback
// is Slack's redirect of that browser, authenticated by the single-use state and the cookie.
func (s *Server) slackOAuthRoutes(r *mux.Router) {
	st := r.PathPrefix("/slack/oauth/start").Subrouter()
	st.Use(s.authenticate, s.requireAdminOnly)
	st.HandleFunc("", s.slackOAuthStart).Methods(http.MethodGet)
	r.HandleFunc("/slack/install/{token}", s.slackInstallLink).Methods(http.MethodGet)
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

// slackOAuthStart answers an install link for the caller's tenant, as 200 JSON and never as a
// redirect: an API client that follows redirects would otherwise open, and so use up, the one-time
// link that belongs to the browser approving the install.
func (s *Server) slackOAuthStart(w http.ResponseWriter, r *http.Request) {
	if s.oauthOff(w, r) {
		return
	}
	p := principal(r)
	link, exp, err := s.SlackOAuth.InstallLink(r.Context(), p.TenantID, "principal:"+string(p.ID))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]string{"install_url": link, "expires_at": exp.UTC().Format(time.RFC3339)})
}

// slackInstallLink uses an install link up: the browser gets the binding cookie (HttpOnly,
// SameSite=Lax so Slack's top-level redirect carries it back, Secure behind https) and is sent
// to Slack's authorize page.
func (s *Server) slackInstallLink(w http.ResponseWriter, r *http.Request) {
	if s.oauthOff(w, r) {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	nonce := s.SlackOAuth.NewBrowserNonce()
	u, err := s.SlackOAuth.OpenLink(r.Context(), mux.Vars(r)["token"], nonce)
	if err != nil {
		s.logger().WarnContext(r.Context(), "slack install link refused", "request_id", requestID(r.Context()), "err", err)
		s.writeError(w, r, &apiError{http.StatusBadRequest, "install_failed", "the install link is invalid, used or expired; ask for a new one"})
		return
	}
	// Secure follows the public URL: a plain-http development setup would never get the cookie back.
	http.SetCookie(w, &http.Cookie{Name: slackBrowserCookie, Value: nonce, Path: s.SlackOAuth.CallbackPath(), MaxAge: int(time.Hour / time.Second), //nolint:gosec // see above
		HttpOnly: true, Secure: s.SlackOAuth.SecureCookies(), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, u, http.StatusSeeOther) //nolint:gosec // u is Slack's configured authorize URL with our query, never the request's
}

func (s *Server) slackOAuthCallback(w http.ResponseWriter, r *http.Request) {
	if s.oauthOff(w, r) {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	q := r.URL.Query()
	if q.Get("error") != "" {
		s.writeError(w, r, &apiError{http.StatusBadRequest, "install_cancelled", "the install was not approved in Slack"})
		return
	}
	browser := ""
	if c, err := r.Cookie(slackBrowserCookie); err == nil {
		browser = c.Value
	}
	if err := s.SlackOAuth.Callback(r.Context(), q.Get("code"), q.Get("state"), browser); err != nil {
		if errors.Is(err, domain.ErrValidation) || errors.Is(err, domain.ErrConflict) {
			s.writeError(w, r, err)
			return
		}
		// Forged, expired, replayed, unknown or other-browser states and failed exchanges look
		// alike from outside.
		s.logger().WarnContext(r.Context(), "slack oauth callback refused", "request_id", requestID(r.Context()), "err", err)
		s.writeError(w, r, &apiError{http.StatusBadRequest, "install_failed", "the install link is invalid or expired, or was opened in another browser; start again"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: slackBrowserCookie, Value: "", Path: s.SlackOAuth.CallbackPath(), MaxAge: -1, //nolint:gosec // Secure follows the public URL
		HttpOnly: true, Secure: s.SlackOAuth.SecureCookies(), SameSite: http.SameSiteLaxMode})
	writeJSON(w, http.StatusOK, map[string]string{"status": "installed"})
}
