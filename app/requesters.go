package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/projections/privacy"
	"github.com/casebook/casebook/queries"
)

// MaxRequesterInquiries bounds one requester lookup; more are reported as truncated.
const MaxRequesterInquiries = 1000

// MaxEmailLen bounds the address a lookup takes (RFC 5321's path limit).
const MaxEmailLen = 320

func checkEmail(email string) (string, error) {
	n := privacy.NormalizeEmail(email)
	if n == "" {
		return "", domain.Invalid("email", "is required")
	}
	if len(n) > MaxEmailLen || !strings.Contains(n, "@") || strings.ContainsAny(n, " \t\r\n") {
		return "", domain.Invalid("email", "is not an email address")
	}
	return n, nil
}

// findRequester returns the inquiries of tenant whose requester had email (any case), oldest first,
// through the blind index; the address itself is never stored nor compared in clear.
func (a *App) findRequester(ctx context.Context, tenant domain.TenantID, email string) ([]domain.InquiryID, bool, error) {
	n, err := checkEmail(email)
	if err != nil {
		return nil, false, err
	}
	ids, err := privacy.Find(ctx, a.DB, tenant, a.Keys.BlindIndexes(tenant, n), MaxRequesterInquiries+1)
	if err != nil {
		return nil, false, err
	}
	truncated := len(ids) > MaxRequesterInquiries
	if truncated {
		ids = ids[:MaxRequesterInquiries]
	}
	return ids, truncated, nil
}

// auditLookup records a lookup or export of a person's data: who, when, which outcome; never the
// address.
func (a *App) auditLookup(ctx context.Context, actor domain.Principal, requestID, command string, err error) {
	e := commands.AuditEntry{RequestID: requestID, Tenant: actor.TenantID, Actor: actor.ID, Command: command,
		Outcome: commands.OutcomeAccepted, Code: commands.ErrorCode(err), At: a.Config.Now().UTC()}
	switch {
	case err != nil && e.Code == "internal":
		e.Outcome = commands.OutcomeFailed
	case err != nil:
		e.Outcome = commands.OutcomeRefused
	}
	if werr := a.Audit.Record(context.WithoutCancel(ctx), e); werr != nil {
		a.Config.Logger.ErrorContext(ctx, "audit write failed", "request_id", requestID, "command", command, "err", werr)
	}
}

// requesterAPI serves GET /v1/admin/requesters.
type requesterAPI struct{ a *App }

// FindRequester lists the inquiries of actor's tenant that email filed (admin only), and audits
// the lookup as "requester_lookup".
func (r requesterAPI) FindRequester(ctx context.Context, actor domain.Principal, requestID, email string) (items []queries.Inquiry, truncated bool, err error) {
	a := r.a
	defer func() { a.auditLookup(ctx, actor, requestID, "requester_lookup", err) }()
	if err := domain.Authorize(actor, domain.ActAdminister); err != nil {
		return nil, false, err
	}
	ids, truncated, err := a.findRequester(ctx, actor.TenantID, email)
	if err != nil {
		return nil, false, err
	}
	for _, id := range ids {
		q, err := a.Reader.Get(ctx, actor.TenantID, id)
		if errors.Is(err, domain.ErrNotFound) {
			continue // the query model has not seen it yet
		}
		if err != nil {
			return nil, false, err
		}
		if q.Erased {
			continue
		}
		items = append(items, q)
	}
	return items, truncated, nil
}

// RequesterExport is what Casebook holds about one person in one tenant: each inquiry they filed
// with every event opened with its data key (messages, notes, follow-up notes), and the metadata
// of its attachments.
type RequesterExport struct {
	Tenant      domain.TenantID    `json:"tenant_id"`
	Email       string             `json:"email"`
	GeneratedAt time.Time          `json:"generated_at"`
	Truncated   bool               `json:"truncated,omitempty"`
	Inquiries   []RequesterInquiry `json:"inquiries"`
	Notice      string             `json:"notice"`
}

// RequesterInquiry is one inquiry of an export.
type RequesterInquiry struct {
	ID          domain.InquiryID      `json:"id"`
	Receipt     string                `json:"receipt"`
	Status      domain.Status         `json:"status"`
	Category    string                `json:"category"`
	Requester   domain.Requester      `json:"requester"`
	Subject     string                `json:"subject"`
	Message     string                `json:"message"`
	CreatedAt   time.Time             `json:"created_at"`
	ClosedAt    *time.Time            `json:"closed_at,omitempty"`
	Archived    bool                  `json:"archived"`
	LegalHold   bool                  `json:"legal_hold"`
	Events      []ExportedEvent       `json:"events"`
	Attachments []commands.Attachment `json:"attachments"`
}

// ExportedEvent is one event of an inquiry, opened.
type ExportedEvent struct {
	Version    uint64             `json:"version"`
	Type       string             `json:"type"`
	Actor      domain.PrincipalID `json:"actor"`
	OccurredAt time.Time          `json:"occurred_at"`
	Data       json.RawMessage    `json:"data"`
}

// ExportRequester writes what Casebook holds about the person with email in tenant, read from the
// canonical log (not the query model), and audits the export as "requester_export" by actor. The
// blind index must have caught up with the log (CatchUpPrivacy) for the latest inquiries to be
// included.
func (a *App) ExportRequester(ctx context.Context, actor domain.Principal, requestID, email string) (out RequesterExport, err error) {
	defer func() { a.auditLookup(ctx, actor, requestID, "requester_export", err) }()
	if err := domain.Authorize(actor, domain.ActAdminister); err != nil {
		return out, err
	}
	ids, truncated, err := a.findRequester(ctx, actor.TenantID, email)
	if err != nil {
		return out, err
	}
	out = RequesterExport{Tenant: actor.TenantID, Email: privacy.NormalizeEmail(email), GeneratedAt: a.Config.Now().UTC(), Truncated: truncated,
		Inquiries: []RequesterInquiry{},
		Notice: "Casebook's own records. Slack holds its own copy of threads posted for these inquiries (and replies people typed there), " +
			"under the workspace's retention; backups taken before an erasure hold what they held."}
	for _, id := range ids {
		q, err := a.Commands.Load(ctx, actor.TenantID, id)
		if err != nil {
			return out, err
		}
		if q.Erased {
			continue
		}
		item := RequesterInquiry{ID: q.ID, Receipt: q.Receipt, Status: q.Status, Category: q.Category, Requester: q.Requester,
			Subject: q.Subject, Message: q.Message, CreatedAt: q.CreatedAt.UTC(), Archived: q.Archived, LegalHold: q.Held,
			Events: []ExportedEvent{}}
		if !q.ClosedAt.IsZero() {
			c := q.ClosedAt.UTC()
			item.ClosedAt = &c
		}
		recs, err := a.Store.ReadStream(ctx, eventstore.InquiryStream(actor.TenantID, id), 0, 0)
		if err != nil {
			return out, err
		}
		for _, r := range recs {
			m, err := eventstore.DecodeMetadata(r.Metadata)
			if err != nil {
				return out, fmt.Errorf("%s revision %d: metadata: %w", r.StreamID, r.Revision, err)
			}
			item.Events = append(item.Events, ExportedEvent{Version: r.Revision + 1, Type: r.Type, Actor: m.Actor, OccurredAt: m.OccurredAt.UTC(),
				Data: json.RawMessage(r.Data)})
		}
		if item.Attachments, err = a.Attachments.List(ctx, actor.TenantID, id); err != nil {
			return out, err
		}
		if item.Attachments == nil {
			item.Attachments = []commands.Attachment{}
		}
		out.Inquiries = append(out.Inquiries, item)
	}
	return out, nil
}

// CatchUpPrivacy brings the privacy index (blind index and retention index) up to the log's head
// as it stands now, following a running server's checkpoint if one owns the index. For commands
// run beside a server (casebook export, casebook retention sweep).
func (a *App) CatchUpPrivacy(ctx context.Context) error {
	head, err := a.Store.Head(ctx)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = a.privacyIndex.Run(runCtx); close(done) }()
	werr := a.privacyIndex.WaitFor(ctx, head)
	stop()
	<-done
	return werr
}
