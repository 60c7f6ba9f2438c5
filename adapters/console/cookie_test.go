package console_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSessionCookieNameFollowsScheme: under https (TLS on the request, or an https public URL)
// only the __Host- cookie is read, so a plain-named cookie planted from a sibling domain signs
// nobody in (login fixation); over plain HTTP only the plain cookie is read.
func TestSessionCookieNameFollowsScheme(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		publicURL string
		tls       bool
		accepted  string // the cookie name read; the other is ignored
	}{
		{"plain http", "", false, "casebook_session"},
		{"TLS on the request", "", true, "__Host-casebook_session"},
		{"https public URL", "https://casebook.example", false, "__Host-casebook_session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := embedded(t)
			cfg.PublicURL = tc.publicURL
			tb := setup(t, cfg)
			_, _, secret, err := tb.app.Tenancy.StartSession(t.Context(), tb.op, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			h := tb.app.Handler()
			for _, name := range []string{"casebook_session", "__Host-casebook_session"} {
				req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/console/inbox", nil)
				if tc.tls {
					req.TLS = &tls.ConnectionState{}
				}
				req.AddCookie(&http.Cookie{Name: name, Value: secret})
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				served := rec.Code == http.StatusOK && strings.Contains(rec.Body.String(), "Olga")
				if served != (name == tc.accepted) {
					t.Errorf("cookie %s: %d (served %v), want served only for %s", name, rec.Code, served, tc.accepted)
				}
				if !served && (rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/console/signin")) {
					t.Errorf("cookie %s refused with %d %q, want a redirect to sign in", name, rec.Code, rec.Header().Get("Location"))
				}
			}
		})
	}
}
