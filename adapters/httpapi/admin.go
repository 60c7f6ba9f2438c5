package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/projections"
)

// Admin is what the admin routes need. Projections are shared by all tenants: statuses carry no
// tenant data, and parked streams are listed and released only within the caller's tenant.
type Admin interface {
	ProjectionStatuses() []projections.Status
	Parked(ctx context.Context, projection string, tenant domain.TenantID) ([]projections.Parked, error)
	RetryParked(ctx context.Context, projection string, tenant domain.TenantID, stream string, skip bool) (*projections.Parked, error)
}

func (s *Server) adminRoutes(r *mux.Router) {
	// The requester lookup authorizes in its implementation, which audits refusals too: an
	// operator's attempt to look a person up is recorded, not only answered 403.
	r.Handle("/v1/admin/requesters", s.authenticate(http.HandlerFunc(s.findRequester))).Methods(http.MethodGet)
	a := r.PathPrefix("/v1/admin").Subrouter()
	a.Use(s.authenticate, s.requireAdmin)
	a.HandleFunc("/projections", s.listProjections).Methods(http.MethodGet)
	a.HandleFunc("/projections/{name}/parked", s.listParked).Methods(http.MethodGet)
	a.HandleFunc("/projections/{name}/parked/retry", s.retryParked(false)).Methods(http.MethodPost)
	a.HandleFunc("/projections/{name}/parked/skip", s.retryParked(true)).Methods(http.MethodPost)
	s.slackAdminRoutes(a)
	s.slackEscalationRoutes(a)
	s.dueAdminRoutes(a)
	a.HandleFunc("/retention-policy", s.getRetentionPolicy).Methods(http.MethodGet)
	a.HandleFunc("/retention-policy", s.putRetentionPolicy).Methods(http.MethodPut)
}

func (s *Server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := domain.Authorize(principal(r), domain.ActAdminister); err != nil {
			s.writeError(w, r, err)
			return
		}
		if s.Admin == nil {
			s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// projectionView is a subscriber's health as a tenant's admin sees it. Log positions, event counts
// and the last error describe every tenant's writes (an error names another tenant's stream), so
// they stay with the operator's CLI (casebook projections list); parked counts only this tenant's
// streams.
type projectionView struct {
	Name         string                 `json:"name"`
	Generation   projections.Generation `json:"generation"`
	Version      int                    `json:"version"`
	CodeVersion  int                    `json:"code_version"`
	State        projections.State      `json:"state"`
	Owner        bool                   `json:"owner"`
	CaughtUp     bool                   `json:"caught_up"`
	EverCaughtUp bool                   `json:"ever_caught_up"`
	LagSeconds   float64                `json:"lag_seconds"`
	Parked       int                    `json:"parked"`
	Failing      bool                   `json:"failing"` // the subscriber's last batch failed
	Heartbeat    time.Time              `json:"heartbeat,omitzero"`
}

func (s *Server) listProjections(w http.ResponseWriter, r *http.Request) {
	tenant := principal(r).TenantID
	var items []projectionView
	for _, st := range s.Admin.ProjectionStatuses() {
		parked, err := s.Admin.Parked(r.Context(), st.Name, tenant)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		items = append(items, projectionView{Name: st.Name, Generation: st.Generation, Version: st.Version, CodeVersion: st.CodeVersion,
			State: st.State, Owner: st.Owner, CaughtUp: st.CaughtUp, EverCaughtUp: st.EverCaughtUp, LagSeconds: st.LagSeconds,
			Parked: len(parked), Failing: st.LastError != "", Heartbeat: st.Heartbeat})
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) listParked(w http.ResponseWriter, r *http.Request) {
	items, err := s.Admin.Parked(r.Context(), mux.Vars(r)["name"], principal(r).TenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) retryParked(skip bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Stream string `json:"stream"`
		}
		if err := decode(w, r, MaxOperatorBody, &in); err != nil {
			s.writeError(w, r, err)
			return
		}
		if in.Stream == "" {
			s.writeError(w, r, domain.Invalid("stream", "is required"))
			return
		}
		still, err := s.Admin.RetryParked(r.Context(), mux.Vars(r)["name"], principal(r).TenantID, in.Stream, skip)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if still != nil {
			writeJSON(w, http.StatusOK, map[string]any{"released": false, "parked": still})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"released": true})
	}
}

// RequestMetrics counts requests by route template, method (or OTHER) and status class; no label
// takes a value a client chose, so the series are bounded and reveal no tenant.
type RequestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewRequestMetrics registers the HTTP metrics with reg.
func NewRequestMetrics(reg prometheus.Registerer) *RequestMetrics {
	m := &RequestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "casebook_http_requests_total", Help: "HTTP requests by route template, method (known ones, else OTHER) and status class (2xx…)."},
			[]string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "casebook_http_request_duration_seconds", Help: "HTTP request latency by route template.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}
