package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/tenancy"
)

// Portal is what the authenticated intake's reads need: the index of submissions by submitter
// (a projection; WaitFor waits until it has applied a position) and the requester-facing view.
type Portal interface {
	Find(ctx context.Context, tenant domain.TenantID, submitter domain.PrincipalID, receipt, externalID string, limit int) ([]domain.InquiryID, error)
	View(ctx context.Context, submitter domain.Principal, id domain.InquiryID) (commands.RequesterView, error)
	WaitFor(ctx context.Context, p eventstore.Position) error
}

// DefaultPortalRate limits authenticated submissions per principal (integration or operator).
var DefaultPortalRate = ratelimit.Rate{Events: 120, Per: time.Minute, Burst: 60}

// MaxPortalList bounds the inquiries listed for one external id, newest first.
const MaxPortalList = 100

// portalInquiry is the documented body of POST /v1/inquiries.
type portalInquiry struct {
	Name       string `json:"name"`
	Email      string `json:"email"`
	ExternalID string `json:"external_id"`
	Subject    string `json:"subject"`
	Message    string `json:"message"`
	Category   string `json:"category"`
	Priority   string `json:"priority"`
	Team       string `json:"team"`
}

// portalRoutes are the authenticated intake and its requester-facing reads: the only routes an
// integration's token opens. They must be registered before the operator routes under
// /v1/inquiries, which refuse integrations.
func (s *Server) portalRoutes(r *mux.Router) {
	r.Handle("/v1/inquiries", s.authenticateFor(domain.ActSubmit, http.HandlerFunc(s.portalIntake))).Methods(http.MethodPost)
	p := r.PathPrefix("/v1/portal").Subrouter()
	p.Use(func(next http.Handler) http.Handler { return s.authenticateFor(domain.ActSubmit, next) })
	p.HandleFunc("/inquiries", s.portalList).Methods(http.MethodGet)
	p.HandleFunc("/inquiries/{receipt}", s.portalGet).Methods(http.MethodGet)
}

// checkTenantCategory refuses a category the tenant does not offer, when it offers any.
func (s *Server) checkTenantCategory(ctx context.Context, t tenancy.Tenant, category string) error {
	p, err := s.Tenancy.Profile(ctx, t)
	if err != nil {
		return err
	}
	return checkCategory(p, category)
}

// checkCategory refuses a category that profile's tenant does not offer, when it offers any.
func checkCategory(p tenancy.Profile, category string) error {
	if len(p.Categories) > 0 && !slices.ContainsFunc(p.Categories, func(c tenancy.Category) bool { return c.Slug == category }) {
		return domain.Invalid("category", "must be one of the tenant's categories")
	}
	return nil
}

// portalIntake is POST /v1/inquiries: an inquiry submitted by an authenticated portal (source
// authenticated_portal), keyed by the caller's own Idempotency-Key (required), rate-limited per
// principal. The same validation and normalization as public intake; no honeypot.
//
// As multipart/form-data it carries attachments: a part "inquiry" with the same JSON and file parts
// named "file". The order is what makes it all or nothing: every file is read and checked (size
// 413, sniffed type 415, count and emptiness 422, the tenant's quota 413) and the intake validated
// before the inquiry is recorded, so a refused file refuses the whole request with nothing
// appended. Then the inquiry is recorded and its files stored under ids derived from it; should
// storing them fail after all (a quota taken meanwhile by a concurrent upload, the database), the
// answer is that error and a retry with the same Idempotency-Key and body stores them and answers
// 201, as a replay does. The key covers the files (names and SHA-256): other files under the same
// key are 422 like another message.
func (s *Server) portalIntake(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	res, files, err := s.acceptPortal(w, r, p)
	var stored []commands.Attachment
	if err == nil && len(files) > 0 {
		stored, err = s.Attachments.CommitIntake(r.Context(), p.TenantID, res.InquiryID, p.ID, files, s.AttachmentLimits)
	} else if len(files) > 0 {
		s.Attachments.Discard(context.WithoutCancel(r.Context()), files...)
	}
	if errors.Is(err, commands.ErrAttachmentQuota) {
		err = &apiError{http.StatusRequestEntityTooLarge, "attachment_quota", "the tenant's attachment storage is full"}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pos := ""
	if res.Position != (eventstore.Position{}) {
		pos = s.tokens.sealPosition(p.TenantID, res.Position)
		w.Header().Set("Casebook-Position", pos)
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(res.Version, 10)))
	out := map[string]any{"id": res.InquiryID, "receipt": res.Receipt, "version": res.Version, "position": pos}
	if files != nil {
		out["attachments"] = stored
	}
	writeJSON(w, http.StatusCreated, out)
}

// acceptPortal returns the staged files also with an error, for the caller to discard.
func (s *Server) acceptPortal(w http.ResponseWriter, r *http.Request, p domain.Principal) (commands.IntakeResult, []commands.StagedFile, error) {
	if ok, retry := s.public.portal.Allow(string(p.ID)); !ok {
		secs := int((retry + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		return commands.IntakeResult{}, nil, &apiError{http.StatusTooManyRequests, "rate_limited", "too many submissions; retry later"}
	}
	key := r.Header.Get("Idempotency-Key")
	if strings.TrimSpace(key) == "" {
		return commands.IntakeResult{}, nil, &apiError{http.StatusBadRequest, "idempotency_key_required", "the Idempotency-Key header is required"}
	}
	var in portalInquiry
	var files []commands.StagedFile
	if isMultipart(r) {
		var err error
		if in, files, err = s.readPortalMultipart(w, r, p); err != nil {
			return commands.IntakeResult{}, nil, err
		}
	} else if err := decode(w, r, s.public.cfg.MaxBody, &in); err != nil {
		return commands.IntakeResult{}, nil, err
	}
	res, err := s.submitPortal(r, p, in, key, files)
	return res, files, err
}

// readPortalMultipart reads an intake with attachments: the "inquiry" part's JSON and every file,
// each checked against the limits, and the tenant's quota checked for their total. files is
// non-nil (perhaps empty) so the answer lists what was stored.
func (s *Server) readPortalMultipart(w http.ResponseWriter, r *http.Request, p domain.Principal) (in portalInquiry, files []commands.StagedFile, err error) {
	if s.Attachments == nil {
		return in, nil, &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "attachments are not accepted here; send application/json"}
	}
	lim := s.AttachmentLimits.WithDefaults()
	var raw []byte
	files, err = s.readParts(w, r, p, lim, map[string]*[]byte{"inquiry": &raw}, s.public.cfg.MaxBody)
	if err != nil {
		return in, nil, err
	}
	defer func() {
		if err != nil {
			s.Attachments.Discard(context.WithoutCancel(r.Context()), files...)
			files = nil
		}
	}()
	if raw == nil {
		return in, nil, badRequest("a multipart intake needs a part named \"inquiry\" holding the inquiry's JSON")
	}
	if err := decodeBytes(raw, &in); err != nil {
		return in, nil, err
	}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	if err := s.Attachments.CheckQuota(r.Context(), p.TenantID, total, lim); errors.Is(err, commands.ErrAttachmentQuota) {
		return in, nil, &apiError{http.StatusRequestEntityTooLarge, "attachment_quota", "the tenant's attachment storage is full"}
	} else if err != nil {
		return in, nil, err
	}
	if files == nil {
		files = []commands.StagedFile{}
	}
	return in, files, nil
}

// submitPortal normalizes, checks the configured limits and the tenant's categories, and records.
func (s *Server) submitPortal(r *http.Request, p domain.Principal, in portalInquiry, key string, files []commands.StagedFile) (commands.IntakeResult, error) {
	pub := publicInquiry{Name: in.Name, Email: in.Email, Subject: in.Subject, Message: in.Message, Category: in.Category}.normalized()
	if err := s.public.cfg.Fields.check(pub); err != nil {
		return commands.IntakeResult{}, err
	}
	if err := s.checkTenantCategory(r.Context(), tenancy.Tenant{ID: p.TenantID}, pub.Category); err != nil {
		return commands.IntakeResult{}, err
	}
	var prio domain.Priority
	var err error
	if in.Priority != "" {
		if prio, err = domain.ParsePriority("priority", in.Priority); err != nil {
			return commands.IntakeResult{}, err
		}
	}
	return s.Commands.Intake(r.Context(), commands.Intake{
		Tenant: p.TenantID, Source: domain.SourcePortal, IdempotencyKey: key, Submitter: &p,
		Requester: domain.Requester{Name: pub.Name, Email: pub.Email},
		Subject:   pub.Subject, Message: pub.Message, Category: pub.Category,
		ExternalID: in.ExternalID, Priority: prio, Team: in.Team,
		CorrelationID: requestID(r.Context()), Files: commands.StagedDigests(files),
	})
}

// portalConsistent waits (at most MaxConsistencyWait) until the portal index has applied every
// write committed before the request: a portal reads back what it just submitted.
func (s *Server) portalConsistent(r *http.Request) error {
	if s.Head == nil {
		return nil
	}
	head, err := s.Head(r.Context())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), MaxConsistencyWait)
	defer cancel()
	if err := s.Portal.WaitFor(ctx, head); err != nil {
		return &apiError{http.StatusServiceUnavailable, "projection_lagging", "the portal index has not caught up yet; retry"}
	}
	return nil
}

// portalList is GET /v1/portal/inquiries?external_id=…: the caller's own submissions for that
// customer, newest first (at most MaxPortalList), as requester-facing views.
func (s *Server) portalList(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if s.Portal == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return
	}
	var err error
	ext := r.URL.Query().Get("external_id")
	if ext == "" {
		err = &apiError{http.StatusBadRequest, "bad_request", "external_id is required"}
	}
	var ids []domain.InquiryID
	if err == nil {
		err = s.portalConsistent(r)
	}
	if err == nil {
		ids, err = s.Portal.Find(r.Context(), p.TenantID, p.ID, "", commands.Normalize(ext, false), MaxPortalList)
	}
	items := []commands.RequesterView{}
	for _, id := range ids {
		if err != nil {
			break
		}
		var v commands.RequesterView
		if v, err = s.Portal.View(r.Context(), p, id); err == nil {
			items = append(items, v)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

// portalGet is GET /v1/portal/inquiries/{receipt}: one of the caller's own submissions. Another
// principal's, another tenant's and an unknown receipt are all 404.
func (s *Server) portalGet(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if s.Portal == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return
	}
	err := s.portalConsistent(r)
	var ids []domain.InquiryID
	if err == nil {
		ids, err = s.Portal.Find(r.Context(), p.TenantID, p.ID, mux.Vars(r)["receipt"], "", 1)
	}
	if err == nil && len(ids) == 0 {
		err = domain.ErrNotFound
	}
	var v commands.RequesterView
	if err == nil {
		v, err = s.Portal.View(r.Context(), p, ids[0])
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
