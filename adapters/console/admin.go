package console

import (
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/tenancy"
)

type adminView struct {
	Projections []projections.Status
	Parked      []projections.Parked
	Effects     []Effect
	Circuits    []Circuit
	Tables      []Table
	People      []domain.Principal
	Tokens      []tokenRow
	Recent      []commands.AdminAction
	DueJobs     []duejobs.Job
	Due         bool
	Slack       bool
	Flash       string
	Error       string
}

type tokenRow struct {
	tenancy.TokenInfo
	Name string
}

// deadStates are the effect states an admin acts on: dead letters (discarded), waiting to retry
// (retryable) and cancelled (quarantined or cancelled by an admin).
var deadStates = []string{"discarded", "retryable", "cancelled"}

func (c *Console) admin(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.allowed(w, r, s, domain.ActAdminister) {
		return
	}
	v := c.adminData(r, s)
	if d := r.URL.Query().Get("done"); d != "" {
		v.Flash = "Done: " + adminLabels[d] + "."
	}
	c.render(w, r, http.StatusOK, "admin", s, v)
}

func (c *Console) adminData(r *http.Request, s *session) *adminView {
	ctx, t := r.Context(), s.P.TenantID
	v := &adminView{Slack: c.Slack != nil}
	warn := func(what string, err error) {
		if err != nil {
			c.Logger.WarnContext(ctx, "console admin "+what, "err", err)
			v.Error = "Some sections could not be read; see the server log."
		}
	}
	if c.Admin != nil {
		v.Projections = c.Admin.ProjectionStatuses()
		for _, p := range v.Projections {
			pk, err := c.Admin.Parked(ctx, p.Name, t)
			warn("parked", err)
			v.Parked = append(v.Parked, pk...)
		}
	}
	var err error
	if c.Slack != nil {
		v.Effects, err = c.Slack.Effects(ctx, t, deadStates, "")
		warn("effects", err)
		v.Circuits, err = c.Slack.Circuits(ctx, t)
		warn("circuits", err)
		v.Tables, err = c.Slack.Tables(ctx, t)
		warn("slack tables", err)
	}
	if c.Due != nil {
		v.Due = true
		for _, st := range []duejobs.State{duejobs.StateDead, duejobs.StateClaimed} {
			jobs, err := c.Due.DueJobs(ctx, t, duejobs.ListFilter{State: st})
			warn("due jobs", err)
			v.DueJobs = append(v.DueJobs, jobs...)
		}
	}
	v.People, err = c.Tenancy.Principals(ctx, t)
	warn("principals", err)
	names := map[domain.PrincipalID]string{}
	for _, p := range v.People {
		names[p.ID] = p.Name
	}
	toks, err := c.Tenancy.TenantTokens(ctx, t)
	warn("tokens", err)
	for _, tk := range toks {
		v.Tokens = append(v.Tokens, tokenRow{TokenInfo: tk, Name: names[tk.PrincipalID]})
	}
	if c.AdminAudit != nil {
		v.Recent, err = c.AdminAudit.Recent(ctx, t, 20)
		warn("audit", err)
	}
	return v
}

var adminLabels = map[string]string{
	"projections/retry": "parked stream retried",
	"projections/skip":  "parked stream's failing event skipped",
	"effects/retry":     "effect queued again",
	"effects/cancel":    "effect cancelled",
	"circuits/close":    "circuit closed",
	"tokens/revoke":     "token revoked",
	"due/retry":         "due job queued again",
	"due/cancel":        "due job cancelled",
	"due/resolve":       "due job marked handled",
}

// adminAct runs one admin action. Every action needs a reason, and every attempt — accepted,
// refused or failed — is recorded in the admin audit with it.
func (c *Console) adminAct(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.allowed(w, r, s, domain.ActAdminister) {
		return
	}
	area, op := mux.Vars(r)["area"], mux.Vars(r)["op"]
	key := area + "/" + op
	if _, ok := adminLabels[key]; !ok || (c.Slack == nil && (area == "effects" || area == "circuits")) || (c.Due == nil && area == "due") {
		c.renderError(w, r, s, http.StatusNotFound, "There is no such action.")
		return
	}
	ctx, t := r.Context(), s.P.TenantID
	e := commands.AdminAction{RequestID: requestID(w), Tenant: t, Actor: s.P.ID, Action: key, Reason: r.PostForm.Get("reason")}
	var run func() error
	switch key {
	case "projections/retry", "projections/skip":
		name, stream := formValue(r, "projection"), formValue(r, "stream")
		e.Target = name + " " + stream
		run = func() error {
			if c.Admin == nil {
				return domain.ErrNotFound
			}
			still, err := c.Admin.RetryParked(ctx, name, t, stream, op == "skip")
			if err == nil && still != nil {
				return domain.Invalid("stream", "is still parked: %s", still.Error)
			}
			return err
		}
	case "effects/retry", "effects/cancel":
		e.Target = "effect " + formValue(r, "id")
		id, err := strconv.ParseInt(formValue(r, "id"), 10, 64)
		run = func() error {
			if err != nil {
				return domain.ErrNotFound
			}
			if op == "retry" {
				return c.Slack.RetryEffect(ctx, t, id)
			}
			return c.Slack.CancelEffect(ctx, t, id)
		}
	case "circuits/close":
		ch := formValue(r, "channel")
		e.Target = "channel " + ch
		run = func() error { return c.Slack.CloseCircuit(ctx, t, ch) }
	case "due/retry", "due/cancel", "due/resolve":
		id := formValue(r, "id")
		e.Target = "due job " + id
		run = func() error { return c.reviewDue(ctx, s, op, id, e.Reason) }
	case "tokens/revoke":
		id := formValue(r, "token_id")
		e.Target = id
		run = func() error { return c.Tenancy.RevokeTenantToken(ctx, t, id) }
	}
	if c.AdminAudit == nil {
		c.renderError(w, r, s, http.StatusServiceUnavailable, "Admin actions are unavailable: there is no admin audit.")
		return
	}
	if err := c.AdminAudit.Run(ctx, e, c.Now(), run); err != nil {
		code, status, _ := commands.Classify(err)
		if status >= http.StatusInternalServerError {
			c.Logger.ErrorContext(ctx, "console admin action", "request_id", requestID(w), "action", key, "err", err)
		}
		v := c.adminData(r, s)
		v.Error = adminLabels[key] + " — refused: " + messageFor(code, err)
		c.render(w, r, status, "admin", s, v)
		return
	}
	http.Redirect(w, r, "/console/admin?done="+key+"#"+area, http.StatusSeeOther) //nolint:gosec // key is one of adminLabels' keys: a fixed local path
}
