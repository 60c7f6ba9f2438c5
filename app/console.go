package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/casebook/casebook/adapters/console"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// wireConsole builds the operator console on the same executor, reader and tenancy as the API.
func (a *App) wireConsole(ctx context.Context) error {
	audit, err := commands.NewAdminAudit(ctx, a.DB)
	if err != nil {
		return err
	}
	a.Console = &console.Console{
		Commands: a.audited(), Reader: a.Reader, Tenancy: a.Tenancy, QueryModel: a.QueryModel(), Head: a.committedHead, Admin: a,
		Slack: consoleSlack{a}, Due: dueAPI{a}, Attachments: a.Attachments, AdminAudit: audit, Audit: a.Audit, Logger: a.Config.Logger, Now: a.Config.Now,
		SecureCookies: strings.HasPrefix(a.Config.PublicURL, "https://"), Secret: a.Commands.Secret,
		SignInRate: a.Config.ConsoleSignInRate, TrustedProxies: a.Config.Public.TrustedProxies,
	}
	return nil
}

// consoleSlack adapts the Slack projection to the console, always within one tenant.
type consoleSlack struct{ a *App }

var _ console.Slack = consoleSlack{}

func (s consoleSlack) Health(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (console.SlackState, error) {
	h, err := s.a.Threads.Health(ctx, tenant, id)
	if err != nil {
		return console.SlackState{}, err
	}
	return console.SlackState{State: h.State, DesiredVersion: h.DesiredVersion, ObservedVersion: h.ObservedVersion, Channel: h.Channel,
		LastSuccess: h.LastSuccess, LastError: h.LastError, ErrorClass: h.ErrorClass}, nil
}

// Targets reads the effect runtime's per-target health: the thread and each List row.
func (s consoleSlack) Targets(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) ([]console.Target, error) {
	hs, err := s.a.Effects.Health(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	out := make([]console.Target, 0, len(hs))
	for _, h := range hs {
		kind := "thread"
		if strings.Contains(h.Target.Kind, "list") {
			kind = "list_row"
		}
		out = append(out, console.Target{Kind: kind, Destination: h.Target.Destination, LastSuccess: h.LastSuccess, LastError: h.LastError,
			ErrorClass: string(h.ErrorClass), LastErrorAt: h.LastErrorAt})
	}
	return out, nil
}

// Effects lists the effect jobs of every kind (threads, List rows) through the runtime's one listing.
func (s consoleSlack) Effects(ctx context.Context, tenant domain.TenantID, states []string, inquiry domain.InquiryID) ([]console.Effect, error) {
	list, err := s.a.Effects.Effects(ctx, tenant, slackeffects.Filter{States: states, Inquiry: inquiry, Limit: 1000})
	if err != nil {
		return nil, err
	}
	var out []console.Effect
	for _, e := range list {
		out = append(out, console.Effect{ID: e.ID, Kind: e.Kind, State: string(e.State), Inquiry: e.Inquiry, Version: e.Version,
			Attempt: e.Attempt, MaxAttempts: e.MaxAttempts, LastError: e.LastError, ScheduledAt: e.ScheduledAt, FinalizedAt: e.FinalizedAt})
	}
	return out, nil
}

func (s consoleSlack) RetryEffect(ctx context.Context, tenant domain.TenantID, id int64) error {
	_, err := s.a.Effects.Retry(ctx, tenant, id)
	return err
}

func (s consoleSlack) CancelEffect(ctx context.Context, tenant domain.TenantID, id int64) error {
	_, err := s.a.Effects.Cancel(ctx, tenant, id)
	return err
}

func (s consoleSlack) Circuits(ctx context.Context, tenant domain.TenantID) ([]console.Circuit, error) {
	cs, err := s.a.Effects.Guard.Circuits(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]console.Circuit, 0, len(cs))
	for _, c := range cs {
		out = append(out, console.Circuit{Channel: c.Channel, Open: c.Open, Reason: c.Reason, OpenedAt: c.OpenedAt, CooldownUntil: c.CooldownUntil})
	}
	return out, nil
}

func (s consoleSlack) CloseCircuit(ctx context.Context, tenant domain.TenantID, channel string) error {
	_, err := s.a.Effects.Guard.CloseCircuit(ctx, tenant, channel)
	return err
}

// Tables shows the tenant's Slack Lists: activation, schema, sync health, cooldown and circuit.
func (s consoleSlack) Tables(ctx context.Context, tenant domain.TenantID) ([]console.Table, error) {
	sts, err := s.a.Lists.Store.Statuses(ctx, tenant)
	if err != nil {
		return nil, err
	}
	t := console.Table{Title: "Slack Lists", Note: "Activate, check and close circuits with casebook lists.",
		Columns: []string{"List", "Team", "Clearance", "Activation", "Schema", "Circuit", "Cooldown until", "Sync",
			"Last observed", "Last fully applied", "Backlog", "Last reconcile"}}
	for _, l := range sts {
		circuit := "closed"
		if l.CircuitOpen {
			circuit = "open: " + l.CircuitReason
		}
		cool := "—"
		if l.CooldownUntil != nil {
			cool = l.CooldownUntil.UTC().Format("2006-01-02 15:04 UTC")
		}
		schema := l.Schema
		if l.SchemaReason != "" {
			schema += ": " + l.SchemaReason
		}
		activation := l.Activation
		if l.LastProbeError != "" {
			activation += " (last probe: " + l.LastProbeError + ")"
		}
		w := l.Reconcile.Watermarks
		backlog := "none"
		if w.BacklogSince != nil {
			backlog = (time.Duration(w.BacklogAgeSeconds) * time.Second).String()
		}
		t.Rows = append(t.Rows, []string{l.List, l.Team, l.Clearance, activation, schema, circuit, cool, fmt.Sprintf("%d synced, %d failing", l.Sync.Synced, l.Sync.Failing),
			stamp(w.LastSuccessfullyObserved), stamp(w.LastFullyApplied), backlog, lastReconcile(l.Reconcile.LastRun)})
	}
	inst := console.Table{Title: "Slack installations", Note: "Install with casebook slack install or the OAuth flow.",
		Columns: []string{"Installation (enterprise/team/app)"}}
	keys, err := s.a.Slack.InstallationKeys(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		inst.Rows = append(inst.Rows, []string{k})
	}
	dest := console.Table{Title: "Slack destinations", Note: "Where each team's threads go (casebook slack destination); a team without its own uses the default.",
		Columns: []string{"Team", "Channel", "Clearance", "Installation"}}
	teams := []string{""}
	ps, err := s.a.Tenancy.Principals(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Team != "" && !slices.Contains(teams, p.Team) {
			teams = append(teams, p.Team)
		}
	}
	seen := map[string]bool{}
	for _, team := range teams {
		d, err := s.a.Slack.DestinationFor(ctx, tenant, team)
		if errors.Is(err, domain.ErrNotFound) || (err == nil && seen[d.ID]) {
			continue
		}
		if err != nil {
			return nil, err
		}
		seen[d.ID] = true
		label := d.Team
		if label == "" {
			label = "(default)"
		}
		dest.Rows = append(dest.Rows, []string{label, d.Channel, d.ClearanceStr, d.Installation.ID})
	}
	return []console.Table{inst, dest, t}, nil
}

func stamp(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// lastReconcile summarizes a List's last reconcile run: complete or why it stopped, then its
// non-zero outcome counts and quarantined rows.
func lastReconcile(r *lists.Report) string {
	if r == nil {
		return "never run"
	}
	head := "complete"
	if !r.Complete {
		head = "incomplete (" + r.Stopped + ")"
	}
	var parts []string
	for _, o := range lists.Outcomes {
		if n := r.Outcomes[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
	}
	if len(r.Quarantined) > 0 {
		parts = append(parts, fmt.Sprintf("quarantined rows %d", len(r.Quarantined)))
	}
	if len(parts) == 0 {
		return head
	}
	return head + ": " + strings.Join(parts, ", ")
}
