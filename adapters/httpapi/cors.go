package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"
)

// CORS for the public JSON intake. A browser page on one of the tenant's trusted origins (tenants
// set-origins) may call the intake from JavaScript: its preflight is answered and its responses
// carry Access-Control-Allow-Origin. Any other origin, and any unknown tenant, gets no CORS header
// at all (and the same 204 to a preflight), so the browser withholds the answer and a probe learns
// nothing about which tenants exist. No credentials are involved: the intake takes no cookies.
const (
	corsAllowMethods  = "POST"
	corsAllowHeaders  = "Content-Type, Idempotency-Key"
	corsExposeHeaders = "Retry-After, X-Request-Id"
	corsMaxAge        = "600"
)

// corsRequestHeaders are the request headers a preflight may ask for, lower-cased.
var corsRequestHeaders = map[string]bool{"content-type": true, "idempotency-key": true}

// allowOrigin sets the CORS response headers when the request's Origin is one of trusted.
func allowOrigin(w http.ResponseWriter, r *http.Request, trusted []string) bool {
	w.Header().Add("Vary", "Origin")
	o := r.Header.Get("Origin")
	if o == "" || !slices.Contains(trusted, o) {
		return false
	}
	w.Header().Set("Access-Control-Allow-Origin", o)
	w.Header().Set("Access-Control-Expose-Headers", corsExposeHeaders)
	return true
}

// publicPreflight is OPTIONS /v1/public/{tenant_slug}/inquiries: rate-limited per client like a
// page view, then answered with CORS headers only for a trusted origin asking for POST with the
// documented headers.
func (s *Server) publicPreflight(w http.ResponseWriter, r *http.Request) {
	if err := s.admitPage(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	_, origins, _, err := s.Tenancy.PublicTenant(r.Context(), mux.Vars(r)["tenant_slug"])
	if err == nil && r.Header.Get("Access-Control-Request-Method") == http.MethodPost && requestHeadersAllowed(r) &&
		allowOrigin(w, r, origins) {
		w.Header().Set("Access-Control-Allow-Methods", corsAllowMethods)
		w.Header().Set("Access-Control-Allow-Headers", corsAllowHeaders)
		w.Header().Set("Access-Control-Max-Age", corsMaxAge)
	} else if err != nil {
		w.Header().Add("Vary", "Origin") // as allowOrigin would have
	}
	w.WriteHeader(http.StatusNoContent)
}

func requestHeadersAllowed(r *http.Request) bool {
	for _, h := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" && !corsRequestHeaders[h] {
			return false
		}
	}
	return true
}
