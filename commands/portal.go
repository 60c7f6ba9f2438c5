package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// RequesterView is what the requester of an inquiry may see through the portal that submitted it:
// the receipt, the coarse status (open or closed: the exact status is internal), when it was
// created and when that status last changed, and what the requester sent (messages, and files
// listed by the caller from the attachment store). Nothing internal: no
// notes, owner, SLA or Slack state; priority and team only where the tenant shows them
// (RequesterFields, set by `casebook tenants set-portal`), and then only once set.
type RequesterView struct {
	Receipt    string             `json:"receipt"`
	Status     string             `json:"status"`
	CreatedAt  time.Time          `json:"created_at"`
	UpdatedAt  time.Time          `json:"updated_at"`
	ExternalID string             `json:"external_id"`
	Subject    string             `json:"subject"`
	Category   string             `json:"category"`
	Messages   []RequesterMessage `json:"messages"`
	Priority   string             `json:"priority,omitempty"`
	Team       string             `json:"team,omitempty"`
	// Attachments are the files the requester's portal sent (never an operator's), described
	// without an id: the portal reads offer no download.
	Attachments []RequesterAttachment `json:"attachments,omitempty"`
}

// RequesterAttachment describes a file the requester sent.
type RequesterAttachment struct {
	Name        string    `json:"name"`
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size"`
	CreatedAt   time.Time `json:"created_at"`
}

// RequesterFields are the internal fields a tenant lets requesters see (none by default).
type RequesterFields struct {
	Priority, Team bool
}

// RequesterMessage is one message the requester sent.
type RequesterMessage struct {
	At   time.Time `json:"at"`
	Body string    `json:"body"`
}

// CoarseStatus is the requester-facing status of s: "open" until resolved or cancelled, then
// "closed" (the domain's status.coarse).
func CoarseStatus(s domain.Status) string {
	if s.Terminal() {
		return "closed"
	}
	return "open"
}

// RequesterView folds the inquiry's stream into the view its submitter may read. An inquiry that
// submitter did not submit, of another tenant, or unknown is domain.ErrNotFound alike. show adds
// the internal fields the tenant allows.
func (h *Handler) RequesterView(ctx context.Context, submitter domain.Principal, id domain.InquiryID, show RequesterFields) (RequesterView, error) {
	notFound := fmt.Errorf("inquiry: %w", domain.ErrNotFound)
	if submitter.TenantID == "" || submitter.ID == "" || id == "" {
		return RequesterView{}, notFound
	}
	recs, err := h.Store.ReadStream(ctx, eventstore.InquiryStream(submitter.TenantID, id), 0, 0)
	if err != nil {
		return RequesterView{}, err
	}
	q := &domain.Inquiry{}
	var v RequesterView
	for _, r := range recs {
		m, err := eventstore.DecodeMetadata(r.Metadata)
		if err != nil {
			return RequesterView{}, fmt.Errorf("inquiry %s revision %d: metadata: %w", id, r.Revision, err)
		}
		e, err := eventstore.DecodeEvent(r.Type, m.SchemaVersion, r.Data)
		if err != nil {
			return RequesterView{}, err
		}
		if m.TenantID != submitter.TenantID {
			return RequesterView{}, notFound
		}
		before := CoarseStatus(q.Status)
		q.Apply(e, m.OccurredAt)
		if q.Version == 1 || CoarseStatus(q.Status) != before {
			v.UpdatedAt = m.OccurredAt.UTC()
		}
	}
	if !q.Exists() || q.SubmittedBy != submitter.ID {
		return RequesterView{}, notFound
	}
	v.Receipt, v.Status, v.CreatedAt = q.Receipt, CoarseStatus(q.Status), q.CreatedAt.UTC()
	v.ExternalID, v.Subject, v.Category = q.ExternalID, q.Subject, q.Category
	v.Messages = []RequesterMessage{{At: q.CreatedAt.UTC(), Body: q.Message}}
	if show.Priority {
		v.Priority = string(q.Priority)
	}
	if show.Team {
		v.Team = q.Team
	}
	return v, nil
}
