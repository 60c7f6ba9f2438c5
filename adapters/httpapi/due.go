package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/queries"
)

// Due is what the follow-up, SLA and due-job routes read: the due-job store and the tenant's SLA
// policy, always within the caller's tenant.
type Due interface {
	DueJobs(ctx context.Context, tenant domain.TenantID, f duejobs.ListFilter) ([]duejobs.Job, error)
	DueJob(ctx context.Context, tenant domain.TenantID, id string) (duejobs.Job, []duejobs.HistoryEntry, error)
	ReviewDueJob(ctx context.Context, r duejobs.Review) (duejobs.Job, error)
	SLAPolicy(ctx context.Context, tenant domain.TenantID) (*domain.SLAPolicy, error)
}

// MaxPolicyBody bounds an SLA policy document.
const MaxPolicyBody = 64 << 10

func (s *Server) dueInquiryRoutes(inquiries *mux.Router) {
	inquiries.HandleFunc("/{id}/follow-ups", s.scheduleFollowUp).Methods(http.MethodPost)
	inquiries.HandleFunc("/{id}/follow-ups/{job_id}", s.cancelFollowUp).Methods(http.MethodDelete)
	inquiries.HandleFunc("/{id}/due", s.setDueDate).Methods(http.MethodPost)
	inquiries.HandleFunc("/{id}/watchers", s.addWatcher).Methods(http.MethodPost)
	inquiries.HandleFunc("/{id}/team", s.route).Methods(http.MethodPost)
}

func (s *Server) dueAdminRoutes(admin *mux.Router) {
	admin.HandleFunc("/sla-policy", s.getSLAPolicy).Methods(http.MethodGet)
	admin.HandleFunc("/sla-policy", s.putSLAPolicy).Methods(http.MethodPut)
	admin.HandleFunc("/due-jobs", s.listDueJobs).Methods(http.MethodGet)
	admin.HandleFunc("/due-jobs/{id}", s.getDueJob).Methods(http.MethodGet)
	for _, action := range []string{duejobs.ReviewRetry, duejobs.ReviewCancel, duejobs.ReviewResolve} {
		admin.HandleFunc("/due-jobs/{id}/"+action, s.reviewDueJob(action)).Methods(http.MethodPost)
	}
}

func (s *Server) dueMissing(w http.ResponseWriter, r *http.Request) bool {
	if s.Due == nil {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return true
	}
	return false
}

// parseTime reads an RFC 3339 time with its offset.
func parseTime(field, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, domain.Invalid(field, "must be an RFC 3339 time with an offset (2026-12-01T09:00:00+01:00)")
	}
	return t, nil
}

func (s *Server) scheduleFollowUp(w http.ResponseWriter, r *http.Request) {
	var in struct {
		At   string `json:"at"`
		In   string `json:"in"`
		Note string `json:"note"`
	}
	t, err := target(r, false)
	if err == nil {
		err = decode(w, r, MaxOperatorBody, &in)
	}
	c := commands.ScheduleFollowUp{Target: t, Note: in.Note}
	if err == nil && in.At != "" {
		c.At, err = parseTime("at", in.At)
	}
	if err == nil && in.In != "" {
		if c.In, err = time.ParseDuration(in.In); err != nil || c.In <= 0 {
			err = domain.Invalid("in", "must be a positive duration such as 2h or 90m")
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.Commands.ScheduleFollowUp(r.Context(), c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeResultWith(w, r, http.StatusCreated, res.Result, map[string]any{"job_id": res.JobID, "due_at": res.DueAt})
}

func (s *Server) cancelFollowUp(w http.ResponseWriter, r *http.Request) {
	s.command(w, r, false, nil, func(t commands.Target) (commands.Result, error) {
		return s.Commands.CancelFollowUp(r.Context(), commands.CancelFollowUp{Target: t, JobID: mux.Vars(r)["job_id"]})
	})
}

func (s *Server) setDueDate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		DueAt *string `json:"due_at"`
	}
	s.command(w, r, false, &in, func(t commands.Target) (commands.Result, error) {
		c := commands.SetDueDate{Target: t}
		if in.DueAt == nil {
			return commands.Result{}, domain.Invalid("due_at", "is required (null clears the due date)")
		}
		if *in.DueAt != "" {
			var err error
			if c.DueAt, err = parseTime("due_at", *in.DueAt); err != nil {
				return commands.Result{}, err
			}
		}
		return s.Commands.SetDueDate(r.Context(), c)
	})
}

func (s *Server) addWatcher(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Principal string `json:"principal"`
	}
	s.command(w, r, false, &in, func(t commands.Target) (commands.Result, error) {
		return s.Commands.AddWatcher(r.Context(), commands.AddWatcher{Target: t, Principal: domain.PrincipalID(in.Principal)})
	})
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Team string `json:"team"`
	}
	s.command(w, r, false, &in, func(t commands.Target) (commands.Result, error) {
		return s.Commands.Route(r.Context(), commands.Route{Target: t, Team: in.Team})
	})
}

// writeResultWith is writeResult with more fields in the body.
func (s *Server) writeResultWith(w http.ResponseWriter, r *http.Request, status int, res commands.Result, extra map[string]any) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(res.Version, 10)))
	pos := ""
	if res.Position != (eventstore.Position{}) {
		pos = s.tokens.sealPosition(principal(r).TenantID, res.Position)
		w.Header().Set("Casebook-Position", pos)
	}
	body := map[string]any{"id": res.InquiryID, "version": res.Version, "position": pos}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(w, status, body)
}

func (s *Server) getSLAPolicy(w http.ResponseWriter, r *http.Request) {
	if s.dueMissing(w, r) {
		return
	}
	p, err := s.Due.SLAPolicy(r.Context(), principal(r).TenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// readPolicy reads a policy document's body: JSON, at most MaxPolicyBody bytes. The domain decodes
// it strictly (unknown fields, bad values: 422 naming the field). ok is false once an error was
// written.
func (s *Server) readPolicy(w http.ResponseWriter, r *http.Request) (raw []byte, ok bool) {
	if !isJSON(r.Header.Get("Content-Type")) {
		s.writeError(w, r, &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "body must be application/json (charset utf-8)"})
		return nil, false
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxPolicyBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		s.writeError(w, r, &apiError{http.StatusRequestEntityTooLarge, "body_too_large", "body exceeds " + strconv.Itoa(MaxPolicyBody) + " bytes"})
		return nil, false
	case err != nil:
		s.writeError(w, r, badRequest("could not read body"))
		return nil, false
	case !json.Valid(raw):
		s.writeError(w, r, badRequest("malformed JSON"))
		return nil, false
	}
	return raw, true
}

func (s *Server) putSLAPolicy(w http.ResponseWriter, r *http.Request) {
	s.putPolicy(w, r, func(p domain.Principal, raw []byte) (any, eventstore.Position, error) {
		return s.Commands.SetSLAPolicy(r.Context(), commands.SetSLAPolicy{Tenant: p.TenantID, Actor: p, Policy: raw,
			CorrelationID: requestID(r.Context())})
	})
}

// putPolicy replaces the caller's tenant policy with the body (see readPolicy) through set, and
// answers the stored policy with its position.
func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request, set func(domain.Principal, []byte) (any, eventstore.Position, error)) {
	raw, ok := s.readPolicy(w, r)
	if !ok {
		return
	}
	p := principal(r)
	pol, pos, err := set(p, raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Casebook-Position", s.tokens.sealPosition(p.TenantID, pos))
	writeJSON(w, http.StatusOK, pol)
}

func (s *Server) listDueJobs(w http.ResponseWriter, r *http.Request) {
	if s.dueMissing(w, r) {
		return
	}
	q := r.URL.Query()
	f := duejobs.ListFilter{Inquiry: domain.InquiryID(q.Get("inquiry"))}
	var err error
	if v := q.Get("state"); v != "" {
		f.State, err = duejobs.ParseState(v)
	}
	if v := q.Get("limit"); err == nil && v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 {
			err = domain.Invalid("limit", "must be between 1 and 500")
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, err := s.Due.DueJobs(r.Context(), principal(r).TenantID, f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) getDueJob(w http.ResponseWriter, r *http.Request) {
	if s.dueMissing(w, r) {
		return
	}
	j, h, err := s.Due.DueJob(r.Context(), principal(r).TenantID, mux.Vars(r)["id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": j, "history": h})
}

func (s *Server) reviewDueJob(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.dueMissing(w, r) {
			return
		}
		var in struct {
			Reason string `json:"reason"`
		}
		if err := decode(w, r, MaxOperatorBody, &in); err != nil {
			s.writeError(w, r, err)
			return
		}
		p := principal(r)
		j, err := s.Due.ReviewDueJob(r.Context(), duejobs.Review{Tenant: p.TenantID, JobID: mux.Vars(r)["id"], Actor: p, Action: action, Reason: in.Reason})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, j)
	}
}

// pendingJob is a due job as an inquiry's detail shows it: no claim or attempt internals.
type pendingJob struct {
	ID     string    `json:"id"`
	Kind   string    `json:"kind"`
	Target string    `json:"target,omitempty"`
	DueAt  time.Time `json:"due_at"`
	State  string    `json:"state"`
}

// withDue adds the inquiry's clock ("sla") and its pending due jobs to a detail view.
// d is the inquiry's detail as read with its clock; its due jobs are read only when it has some.
func (s *Server) withDue(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, d queries.Detail, detail any) any {
	if s.Due == nil {
		return detail
	}
	extra := map[string]any{}
	c := queries.Clock{Breached: []string{}, Watchers: []domain.PrincipalID{}} // not yet applied by the schedules subscriber: an empty clock
	if d.Clock != nil {
		c = *d.Clock
	}
	extra["sla"] = c
	jobs := []pendingJob{}
	var states []duejobs.State // none to read when the inquiry has no pending or claimed job
	if d.DueJobs {
		states = []duejobs.State{duejobs.StatePending, duejobs.StateClaimed}
	}
	for _, st := range states {
		list, err := s.Due.DueJobs(ctx, tenant, duejobs.ListFilter{Inquiry: id, State: st})
		if err != nil {
			s.logger().WarnContext(ctx, "pending due jobs unavailable", "err", err)
			break
		}
		for _, j := range list {
			jobs = append(jobs, pendingJob{ID: j.ID, Kind: j.Kind, Target: j.Target, DueAt: j.DueAt, State: string(j.State)})
		}
	}
	extra["pending_jobs"] = jobs
	return mergeJSON(detail, extra)
}

// mergeJSON adds fields to the JSON object v marshals to.
func mergeJSON(v any, fields map[string]any) any {
	d, err := json.Marshal(v)
	if err != nil || len(d) < 2 || d[len(d)-1] != '}' {
		return v
	}
	out := map[string]json.RawMessage{}
	if err := json.Unmarshal(d, &out); err != nil {
		return v
	}
	for k, f := range fields {
		b, err := json.Marshal(f)
		if err != nil {
			return v
		}
		out[k] = b
	}
	return out
}

// clockFilter reads the list filters breached and due_before.
func clockFilter(q url.Values, f *queries.Filter) error {
	if v := q.Get("breached"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return domain.Invalid("breached", "must be true or false")
		}
		f.Breached = &b
	}
	if v := q.Get("due_before"); v != "" {
		t, err := parseTime("due_before", v)
		if err != nil {
			return err
		}
		f.DueBefore = t
	}
	return nil
}
