package console

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/queries"
)

type inboxView struct {
	Filter   map[string]string
	Items    []queries.Inquiry
	Counts   []statusCount
	Next     string
	Query    url.Values
	Names    map[domain.PrincipalID]string
	Stale    string
	Receipt  bool
	Statuses []domain.Status
	Prios    []domain.Priority
	Teams    []string
	People   []personOption
	Since    string // the live-update token the page shows
	Due      bool   // due filters offered
}

type statusCount struct {
	Status domain.Status
	N      int
	Active bool
}

type personOption struct {
	ID   domain.PrincipalID
	Name string
}

func (c *Console) inbox(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.allowed(w, r, s, domain.ActRead) {
		return
	}
	q := r.URL.Query()
	f := queries.Filter{Owner: domain.PrincipalID(q.Get("owner")), Team: q.Get("team"), Cursor: q.Get("cursor"), Limit: 25}
	var err error
	if v := q.Get("status"); v != "" {
		if f.Status, err = domain.ParseStatus("status", v); err != nil {
			c.fail(w, r, s, err)
			return
		}
	}
	if v := q.Get("priority"); v != "" {
		if f.Priority, err = domain.ParsePriority("priority", v); err != nil {
			c.fail(w, r, s, err)
			return
		}
	}
	switch q.Get("breached") {
	case "":
	case "true", "false":
		b := q.Get("breached") == "true"
		f.Breached = &b
	default:
		c.renderError(w, r, s, http.StatusBadRequest, "The SLA filter must be breached or not breached.")
		return
	}
	switch q.Get("archived") {
	case "":
	case "true", "false":
		b := q.Get("archived") == "true"
		f.Archived = &b
	default:
		c.renderError(w, r, s, http.StatusBadRequest, "The archive filter must be archived or not archived.")
		return
	}
	if v := q.Get("due_before"); v != "" {
		d, err := time.Parse("2006-01-02", v)
		if err != nil {
			c.fail(w, r, s, domain.Invalid("due_before", "must be a date as YYYY-MM-DD"))
			return
		}
		f.DueBefore = d.AddDate(0, 0, 1) // the whole day
	}
	search := strings.TrimSpace(q.Get("q"))
	isReceipt := strings.HasPrefix(strings.ToUpper(search), "CB-") && !strings.ContainsAny(search, " \t")
	if isReceipt {
		f.Receipt = strings.ToUpper(search)
	} else {
		f.Subject = search
	}
	since, err := c.Reader.Changed(r.Context(), s.P.TenantID)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	items, next, err := c.Reader.List(r.Context(), s.P.TenantID, f)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	counts, err := c.Reader.Counts(r.Context(), s.P.TenantID)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	v := inboxView{Filter: map[string]string{}, Items: items, Query: q, Receipt: isReceipt, Statuses: domain.Statuses, Prios: domain.Priorities,
		Since: since, Due: c.Due != nil}
	for _, k := range []string{"status", "owner", "priority", "team", "q", "breached", "due_before", "archived"} {
		v.Filter[k] = q.Get(k)
	}
	for _, st := range domain.Statuses {
		v.Counts = append(v.Counts, statusCount{Status: st, N: counts[st], Active: f.Status == st})
	}
	if next != "" {
		nq := url.Values{}
		for k, vals := range q {
			nq[k] = vals
		}
		nq.Set("cursor", next)
		v.Next = "/console/inbox?" + nq.Encode()
	}
	v.Names, v.People, v.Teams = c.people(r.Context(), s.P.TenantID)
	v.Stale = c.staleness()
	c.render(w, r, http.StatusOK, "inbox", s, v)
}

// people names the tenant's principals (owner column and filters) and lists its teams.
func (c *Console) people(ctx context.Context, tenant domain.TenantID) (map[domain.PrincipalID]string, []personOption, []string) {
	names := map[domain.PrincipalID]string{}
	ps, err := c.Tenancy.Principals(ctx, tenant)
	if err != nil {
		c.Logger.WarnContext(ctx, "console principals", "err", err)
	}
	var opts []personOption
	var teams []string
	for _, p := range ps {
		if p.Disabled {
			p.Name += " (disabled)" // still named where it owns or watches; refused as a new owner
		}
		names[p.ID] = p.Name
		opts = append(opts, personOption{ID: p.ID, Name: p.Name})
		if p.Team != "" && !slices.Contains(teams, p.Team) {
			teams = append(teams, p.Team)
		}
	}
	slices.Sort(teams)
	return names, opts, teams
}

// staleness says when the query model is behind: pages then warn that they may be out of date.
func (c *Console) staleness() string {
	st := c.QueryModel.Status()
	switch {
	case st.LagSeconds >= 5:
		return "The inquiry list is " + strconv.FormatFloat(st.LagSeconds, 'f', 0, 64) + " s behind the log: recent changes may not show yet."
	case st.Parked > 0:
		return strconv.Itoa(st.Parked) + " inquiry stream(s) are parked after errors: their latest changes do not show (Admin → Projections)."
	case st.LastError != "" && !st.CaughtUp:
		return "The query model is retrying after an error: recent changes may not show yet."
	}
	return ""
}

// flashes confirm an inquiry action, by the action's name.
var flashes = map[string]string{
	"claim": "Claimed: you own this inquiry.", "transition": "Status changed.", "assign": "Assigned.", "note": "Note added.",
	"follow-up": "Follow-up scheduled.", "cancel-follow-up": "Follow-up cancelled.", "due": "Due date saved.",
	"watchers": "Watcher added.", "team": "Team changed.", "archive": "Inquiry archived.", "unarchive": "Inquiry unarchived.",
}

type inquiryView struct {
	Q          queries.Inquiry
	Owner      string
	Timeline   []commandGroup
	Slack      *SlackState
	Targets    []Target
	Due        *dueView
	Files      []attachmentRow
	FollowIn   []struct{ Value, Label string }
	Teams      []string
	Edges      []edge
	People     []personOption
	Prios      []domain.Priority
	Flash      string
	Conflict   string
	Error      string
	Form       map[string]string
	CanWrite   bool
	CanAssign  bool
	CanArchive bool
	Stale      string

	// TimelineFrom is the version the shown page of the timeline starts after; TimelineNext the
	// one the next page starts after (0: this is the last page).
	TimelineFrom, TimelineNext uint64
}

type edge struct {
	To          domain.Status
	NeedsReason bool
}

// commandGroup is one command on the timeline: who ran it and when, the events it appended (in
// version order) and, under each event, the Slack effects it caused.
type commandGroup struct {
	CommandID  string
	ActorName  string
	Actor      domain.PrincipalID
	OccurredAt time.Time
	Events     []timelineRow
}

type timelineRow struct {
	queries.TimelineEntry
	ActorName string
	Detail    string
	Effects   []Effect
}

func (c *Console) inquiry(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.allowed(w, r, s, domain.ActRead) {
		return
	}
	if raw := r.URL.Query().Get("after"); raw != "" {
		// Read-your-writes: wait (boundedly) until the query model has the change just made.
		if pos, err := c.openPosition(s.P.TenantID, raw); err == nil {
			ctx, cancel := context.WithTimeout(r.Context(), maxWait)
			_ = c.QueryModel.WaitFor(ctx, pos)
			cancel()
		}
	}
	v, status, err := c.inquiryData(r, s, domain.InquiryID(mux.Vars(r)["id"]))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	v.Flash = flashes[r.URL.Query().Get("done")]
	c.render(w, r, status, "inquiry", s, v)
}

// inquiryData loads everything the inquiry page shows.
func (c *Console) inquiryData(r *http.Request, s *session, id domain.InquiryID) (*inquiryView, int, error) {
	ctx := r.Context()
	q, err := c.Reader.Get(ctx, s.P.TenantID, id)
	if err != nil {
		return nil, 0, err
	}
	// The timeline a page at a time, from the version in ?from= on (keyset, as the API's).
	from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 63)
	tl, next, err := c.Reader.TimelinePage(ctx, s.P.TenantID, id, from, queries.DefaultTimelineLimit)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return nil, 0, err
	}
	names, people, teams := c.people(ctx, s.P.TenantID)
	v := &inquiryView{Q: q, Owner: names[q.Owner], People: people, Prios: domain.Priorities, Form: map[string]string{}, Stale: c.staleness(),
		Due: c.dueData(ctx, s.P.TenantID, id, names), FollowIn: followUpIn, Teams: teams, TimelineFrom: from, TimelineNext: next}
	v.Files = c.attachmentRows(ctx, s.P.TenantID, id)
	// An archived inquiry refuses every write but unarchive (the domain decides; the page offers
	// only what would be accepted).
	v.CanWrite = domain.Authorize(s.P, domain.ActTransit) == nil && !q.Archived && !q.Erased
	v.CanAssign = domain.Authorize(s.P, domain.ActAssign) == nil && !q.Archived && !q.Erased
	v.CanArchive = domain.Authorize(s.P, domain.ActArchive) == nil && !q.Erased
	for _, to := range domain.Statuses {
		if ok, reason := domain.CanTransition(q.Status, to); ok {
			v.Edges = append(v.Edges, edge{To: to, NeedsReason: reason})
		}
	}
	var effects []Effect
	if c.Slack != nil {
		h, err := c.Slack.Health(ctx, s.P.TenantID, id)
		if err != nil {
			c.Logger.WarnContext(ctx, "console slack health", "err", err)
			h = SlackState{State: "unknown"}
		}
		v.Slack = &h
		if v.Targets, err = c.Slack.Targets(ctx, s.P.TenantID, id); err != nil {
			c.Logger.WarnContext(ctx, "console slack targets", "err", err)
		}
		if effects, err = c.Slack.Effects(ctx, s.P.TenantID, nil, id); err != nil {
			c.Logger.WarnContext(ctx, "console effects", "err", err)
		}
	}
	for _, e := range tl {
		row := timelineRow{TimelineEntry: e, ActorName: names[e.Actor], Detail: detail(e.Data, names)}
		for _, ef := range effects {
			if ef.Version == e.Version {
				row.Effects = append(row.Effects, ef)
			}
		}
		// A command's events are consecutive in its stream; entries without a command id
		// (written before the query model kept it) stand alone.
		if n := len(v.Timeline); n > 0 && e.CommandID != "" && v.Timeline[n-1].CommandID == e.CommandID {
			v.Timeline[n-1].Events = append(v.Timeline[n-1].Events, row)
			continue
		}
		v.Timeline = append(v.Timeline, commandGroup{CommandID: e.CommandID, ActorName: row.ActorName, Actor: e.Actor,
			OccurredAt: e.OccurredAt, Events: []timelineRow{row}})
	}
	return v, http.StatusOK, nil
}

// act runs an inquiry action from a form. Every form carries the version the page showed; a
// stale version re-renders the page with 412 and who changed it.
func (c *Console) act(w http.ResponseWriter, r *http.Request, s *session) {
	id := domain.InquiryID(mux.Vars(r)["id"])
	action := mux.Vars(r)["action"]
	t := commands.Target{Tenant: s.P.TenantID, InquiryID: id, Actor: s.P, CorrelationID: requestID(w),
		IdempotencyKey: formValue(r, "idempotency_key")}
	version, ok := atoi(formValue(r, "version"))
	if !ok {
		c.renderError(w, r, s, http.StatusBadRequest, "The form lacks the inquiry's version. Reload the page and try again.")
		return
	}
	t.IfVersion = &version
	var res commands.Result
	var err error
	switch action {
	case "claim":
		res, err = c.Commands.Claim(r.Context(), commands.Claim{Target: t})
	case "transition":
		cmd := commands.Transition{Target: t, Reason: formValue(r, "reason")}
		cmd.To, err = domain.ParseStatus("to", formValue(r, "to"))
		if err == nil && formValue(r, "priority") != "" {
			cmd.Priority, err = domain.ParsePriority("priority", formValue(r, "priority"))
		}
		if err == nil {
			res, err = c.Commands.Transition(r.Context(), cmd)
		}
	case "assign":
		res, err = c.Commands.Assign(r.Context(), commands.Assign{Target: t, Owner: domain.PrincipalID(formValue(r, "owner"))})
	case "note":
		res, err = c.Commands.AddNote(r.Context(), commands.AddNote{Target: t, Body: r.PostForm.Get("body")})
	case "archive":
		res, err = c.Commands.Archive(r.Context(), commands.Archive{Target: t, Reason: formValue(r, "archive_reason")})
	case "unarchive":
		res, err = c.Commands.Unarchive(r.Context(), commands.Unarchive{Target: t, Reason: formValue(r, "archive_reason")})
	default:
		var handled bool
		if c.Due != nil {
			res, handled, err = c.dueAction(r, action, t)
		}
		if !handled {
			c.renderError(w, r, s, http.StatusNotFound, "There is no such action.")
			return
		}
	}
	if err != nil {
		c.refused(w, r, s, id, version, err)
		return
	}
	to := "/console/inquiries/" + url.PathEscape(string(id)) + "?done=" + action
	if res.Position != (eventstore.Position{}) {
		to += "&after=" + url.QueryEscape(c.sealPosition(s.P.TenantID, res.Position))
	}
	http.Redirect(w, r, to, http.StatusSeeOther) //nolint:gosec // a local path with the id path-escaped
}

// refused re-renders the inquiry page with the refusal, keeping what was typed. A stale version
// says who changed the inquiry (the command layer reports the last actor; only a principal of the
// tenant is named) and asks for a reload.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, s *session, id domain.InquiryID, version uint64, err error) {
	code, status, _ := commands.Classify(err)
	if status >= http.StatusInternalServerError || errors.Is(err, domain.ErrNotFound) {
		c.fail(w, r, s, err)
		return
	}
	if c.Head != nil {
		// Show the change that won: wait (boundedly) for the query model to reach the log's head.
		if head, herr := c.Head(r.Context()); herr == nil {
			ctx, cancel := context.WithTimeout(r.Context(), maxWait)
			_ = c.QueryModel.WaitFor(ctx, head)
			cancel()
		}
	}
	v, _, lerr := c.inquiryData(r, s, id)
	if lerr != nil {
		c.fail(w, r, s, lerr)
		return
	}
	for _, k := range []string{"to", "reason", "priority", "owner", "body", "note", "due_date", "due_time", "team", "archive_reason"} {
		v.Form[k] = r.PostForm.Get(k)
	}
	var vc *domain.VersionConflictError
	var ce *domain.ClaimedError
	switch {
	case errors.As(err, &vc):
		v.Conflict = "This inquiry was changed by " + c.principalName(r.Context(), s.P.TenantID, vc.ChangedBy) + " since you opened it (version " +
			strconv.FormatUint(version, 10) + ", now " + strconv.FormatUint(vc.Version, 10) + "; " + string(v.Q.Status) +
			") — reload to see the change, then try again."
	case errors.As(err, &ce):
		v.Conflict = "Already claimed by " + c.principalName(r.Context(), s.P.TenantID, ce.Owner) + " — reload to see the change."
	case errors.Is(err, domain.ErrConcurrency), errors.Is(err, domain.ErrAlreadyClaimed):
		v.Conflict = "This inquiry was changed since you opened it — reload to see the change, then try again."
	default:
		v.Error = messageFor(code, err)
	}
	c.render(w, r, status, "inquiry", s, v)
}

// principalName names a principal of the tenant, or "someone else" (an intake source, a requester,
// another tenant's id: never shown).
func (c *Console) principalName(ctx context.Context, tenant domain.TenantID, id domain.PrincipalID) string {
	if id != "" {
		if p, err := c.Tenancy.Principal(ctx, tenant, id); err == nil && p.TenantID == tenant {
			return p.Name
		}
	}
	return "someone else"
}

// sealPosition encrypts a log position for tenant: a raw position would tell one tenant how much
// every tenant writes.
func (c *Console) sealPosition(tenant domain.TenantID, p eventstore.Position) string {
	return base64.RawURLEncoding.EncodeToString(c.positions.Seal([]byte(p.String()), []byte(tenant)))
}

// openPosition reverses sealPosition; anything not sealed for tenant is an error.
func (c *Console) openPosition(tenant domain.TenantID, tok string) (eventstore.Position, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return eventstore.Position{}, err
	}
	plain, err := c.positions.Open(b, []byte(tenant))
	if err != nil {
		return eventstore.Position{}, err
	}
	return eventstore.ParsePosition(string(plain))
}
