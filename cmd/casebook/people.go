package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/tenancy"
)

const principalsUsage = `usage:
  casebook principals create --tenant S --name N --role R [--team T] [--ttl D]
  casebook principals list --tenant S
  casebook principals disable|enable --tenant S --id P [--reason R]
  casebook principals set-role --tenant S --id P --role admin|operator|viewer|integration [--reason R]
  casebook principals set-team --tenant S --id P --team T [--reason R]   (--team "" clears it)`

// noReason is the reason recorded for a people change made without --reason: the admin audit
// needs one, and an operator disabling someone in a hurry should not have to invent it.
const noReason = "no reason given"

// tenantsList prints every tenant (id and slug).
func tenantsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("tenants list", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	ts, err := a.Tenancy.Tenants(ctx)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"items": ts})
}

// principalView is a listed principal: never a token or its hash.
type principalView struct {
	tenancy.PrincipalInfo
	SlackUsers []slackinstall.UserLink `json:"slack_users"`
}

// principalsList prints a tenant's principals with their linked Slack users.
func principalsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("principals list", stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		ps, err := a.Tenancy.PrincipalInfos(ctx, *tenant)
		if err != nil {
			return err
		}
		links, err := a.Slack.Links(ctx, t)
		if err != nil {
			return err
		}
		out := make([]principalView, len(ps))
		for i, p := range ps {
			out[i] = principalView{PrincipalInfo: p, SlackUsers: []slackinstall.UserLink{}}
			for _, l := range links {
				if l.Principal == p.ID {
					out[i].SlackUsers = append(out[i].SlackUsers, l)
				}
			}
		}
		return printJSON(stdout, map[string]any{"items": out})
	})
}

// principalsChange disables, enables, or sets the role or team of a principal. The change is
// recorded in the admin audit with the CLI's actor (cli:<user>) and the reason, refused ones too.
func principalsChange(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("principals "+sub, stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	id := fs.String("id", "", required+"principal id (principals list prints it)")
	reason := fs.String("reason", "", "why (recorded in the admin audit; default: "+noReason+")")
	var role, team *string
	switch sub {
	case "set-role":
		role = fs.String("role", "", required+"admin, operator, viewer or integration")
	case "set-team":
		team = fs.String("team", "", `team (operators assign within their team); "" clears it`)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if sub == "set-team" && !flagGiven(fs, "team") {
		return errors.New(`principals set-team: missing required flag --team (--team "" clears the team)`)
	}
	c := tenancy.PrincipalChange{Slug: *tenant, ID: domain.PrincipalID(*id), Reason: *reason}
	switch sub {
	case "disable", "enable":
		d := sub == "disable"
		c.Disable = &d
	case "set-role":
		r := domain.Role(*role)
		c.Role = &r
	case "set-team":
		c.Team = team
	}
	if c.Reason == "" {
		c.Reason = noReason
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		var before, after domain.Principal
		err := adminAudited(ctx, a, t, "principal."+sub, *id, c.Reason, func() error {
			var err error
			before, after, err = a.Tenancy.ChangePrincipal(ctx, c)
			return err
		})
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"principal_id": after.ID, "before": view(before), "after": view(after)})
	})
}

func view(p domain.Principal) map[string]any {
	return map[string]any{"name": p.Name, "role": p.Role, "team": p.Team, "disabled": p.Disabled}
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// adminAudited runs op as the CLI's admin and records it in the admin audit (actor cli:<user>),
// refused and failed attempts included.
func adminAudited(ctx context.Context, a *app.App, t domain.TenantID, action, target, reason string, op func() error) error {
	audit, err := commands.NewAdminAudit(ctx, a.DB)
	if err != nil {
		return err
	}
	return audit.Run(ctx, commands.AdminAction{RequestID: "cli", Tenant: t, Actor: cliActor(t).ID, Action: action, Target: target,
		Reason: reason}, a.Config.Now(), op)
}

// slackUnlinkUser removes a Slack user's links in the tenant: the user's clicks are refused as
// unlinked from the next request on. Audited in the installation stream and the admin audit.
func slackUnlinkUser(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("slack unlink-user", stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	user := fs.String("slack-user", "", required+"Slack user id (U…)")
	installation := fs.String("installation", "", "installation id (default: every installation of the tenant)")
	reason := fs.String("reason", "", "why (recorded in the admin audit; default: "+noReason+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *reason == "" {
		*reason = noReason
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		var removed []slackinstall.UserLink
		err := adminAudited(ctx, a, t, "slack.unlink_user", *user, *reason, func() error {
			var err error
			removed, err = a.Slack.UnlinkUser(ctx, t, *installation, *user, string(cliActor(t).ID))
			return err
		})
		if err != nil {
			return fmt.Errorf("slack unlink-user: %w", err)
		}
		return printJSON(stdout, map[string]any{"unlinked": removed})
	})
}
