package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
)

const slaUsage = `usage:
  casebook sla set --tenant S --file policy.json   replace the tenant's SLA policy (validated strictly)
  casebook sla show --tenant S                     print the tenant's SLA policy`

const jobsUsage = `usage:
  casebook jobs list --tenant S [--state pending|claimed|done|cancelled|dead|resolved] [--inquiry ID] [--limit N]
  casebook jobs show --tenant S --id J             one due job with its attempt and review history
  casebook jobs retry|cancel|resolve --tenant S --id J --reason R
                                                   reviewed manual recovery; actor and reason are recorded`

// cliActor is the principal the CLI records for a tenant: an admin named after the operating-system
// user. The CLI runs with the database's own trust, so it acts as the tenant's administrator.
func cliActor(t domain.TenantID) domain.Principal {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	return domain.Principal{ID: domain.PrincipalID("cli:" + name), TenantID: t, Name: name, Role: domain.RoleAdmin}
}

func slaCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "set" && args[0] != "show") {
		return errors.New(slaUsage)
	}
	fs, sf := newFlags("sla "+args[0], stderr)
	return policyCmd(ctx, fs, sf, args, stdout, stderr, "tenant %s has no SLA policy",
		func(a *app.App, t domain.TenantID) (any, error) {
			p, err := a.Commands.SLAPolicy(ctx, t)
			return p, err
		},
		func(x commands.Executor, t domain.TenantID, doc []byte) (any, error) {
			p, _, err := x.SetSLAPolicy(ctx, commands.SetSLAPolicy{Tenant: t, Actor: cliActor(t), Policy: doc, CorrelationID: "cli"})
			return p, err
		})
}

// policyCmd is `<policy> set|show --tenant S [--file F]` for a tenant's policy document: show
// prints the current one (none: the missing message, with the tenant's slug), set reads the
// document (- is stdin, at most 1 MiB) and stores it through the audited command layer.
func policyCmd(ctx context.Context, fs *flag.FlagSet, sf *storageFlags, args []string, stdout, stderr io.Writer, missing string,
	show func(*app.App, domain.TenantID) (any, error), set func(commands.Executor, domain.TenantID, []byte) (any, error)) error {
	tenant := fs.String("tenant", "", required+"tenant slug")
	var file *string
	if args[0] == "set" {
		file = fs.String("file", "", required+"the policy JSON document (- reads stdin)")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		if args[0] == "show" {
			p, err := show(a, t)
			if errors.Is(err, domain.ErrNotFound) {
				return fmt.Errorf(missing, *tenant)
			}
			if err != nil {
				return err
			}
			return printJSON(stdout, p)
		}
		var doc []byte
		var err error
		if *file == "-" {
			doc, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
		} else {
			doc, err = os.ReadFile(*file) //nolint:gosec // the operator names the file on their own command line
		}
		if err != nil {
			return err
		}
		p, err := set(&commands.Audited{Next: a.Commands, Sink: a.Audit, Now: a.Config.Now, Logger: a.Config.Logger}, t, doc)
		if err != nil {
			return err
		}
		return printJSON(stdout, p)
	})
}

func jobsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(jobsUsage)
	}
	fs, sf := newFlags("jobs "+args[0], stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	var state, inquiry, id, reason *string
	var limit *int
	switch args[0] {
	case "list":
		state = fs.String("state", "", "only jobs in this state")
		inquiry = fs.String("inquiry", "", "only one inquiry's jobs")
		limit = fs.Int("limit", 100, "at most this many jobs (1-500)")
	case "show":
		id = fs.String("id", "", required+"due job id")
	case duejobs.ReviewRetry, duejobs.ReviewCancel, duejobs.ReviewResolve:
		id = fs.String("id", "", required+"due job id")
		reason = fs.String("reason", "", required+"why (recorded with the actor in the job's history)")
	default:
		return errors.New(jobsUsage)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		switch args[0] {
		case "list":
			f := duejobs.ListFilter{Inquiry: domain.InquiryID(*inquiry), Limit: *limit}
			if *state != "" {
				st, err := duejobs.ParseState(*state)
				if err != nil {
					return err
				}
				f.State = st
			}
			items, err := a.DueJobs.List(ctx, t, f)
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"items": items})
		case "show":
			j, err := a.DueJobs.Get(ctx, t, *id)
			if err != nil {
				return err
			}
			h, err := a.DueJobs.History(ctx, t, *id)
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"job": j, "history": h})
		}
		j, err := a.DueJobs.Review(ctx, duejobs.Review{Tenant: t, JobID: *id, Actor: cliActor(t), Action: args[0], Reason: *reason})
		if err != nil {
			return err
		}
		return printJSON(stdout, j)
	})
}
