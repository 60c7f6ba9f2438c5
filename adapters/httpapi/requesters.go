package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/queries"
)

// Requesters finds a person's inquiries for access and erasure requests through the blind index
// of requester addresses (the address is never stored in clear). Implementations authorize the
// actor and audit every lookup.
type Requesters interface {
	FindRequester(ctx context.Context, actor domain.Principal, requestID, email string) ([]queries.Inquiry, bool, error)
}

// requesterItem is one inquiry of a requester lookup: identifiers and lifecycle only.
type requesterItem struct {
	ID        domain.InquiryID `json:"id"`
	Receipt   string           `json:"receipt"`
	Status    domain.Status    `json:"status"`
	Archived  bool             `json:"archived"`
	CreatedAt time.Time        `json:"created_at"`
}

// findRequester serves GET /v1/admin/requesters?email=… (admin, the caller's tenant only).
func (s *Server) findRequester(w http.ResponseWriter, r *http.Request) {
	if s.Requesters == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return
	}
	q := r.URL.Query()
	found, truncated, err := s.Requesters.FindRequester(r.Context(), principal(r), requestID(r.Context()), q.Get("email"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items := make([]requesterItem, 0, len(found))
	for _, it := range found {
		items = append(items, requesterItem{ID: it.ID, Receipt: it.Receipt, Status: it.Status, Archived: it.Archived, CreatedAt: it.CreatedAt.UTC()})
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "truncated": truncated})
}

// getRetentionPolicy serves GET /v1/admin/retention-policy (404 when none was set).
func (s *Server) getRetentionPolicy(w http.ResponseWriter, r *http.Request) {
	if s.RetentionPolicy == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return
	}
	p, err := s.RetentionPolicy(r.Context(), principal(r).TenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// putRetentionPolicy serves PUT /v1/admin/retention-policy: the policy replaced, validated strictly
// and audited (retention_policy).
func (s *Server) putRetentionPolicy(w http.ResponseWriter, r *http.Request) {
	s.putPolicy(w, r, func(p domain.Principal, raw []byte) (any, eventstore.Position, error) {
		return s.Commands.SetRetentionPolicy(r.Context(), commands.SetRetentionPolicy{Tenant: p.TenantID, Actor: p, Policy: raw,
			CorrelationID: requestID(r.Context())})
	})
}
