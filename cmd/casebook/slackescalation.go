package main

import (
	"context"
	"errors"
	"io"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
)

// slackEscalation sets, shows or clears the tenant's escalation destination: the channel where
// each escalation is posted. The change is recorded with the OS user (cli:<user>) in the
// installation audit stream.
func slackEscalation(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("slack escalation", stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	ch := fs.String("channel", "", "channel id (C…) where escalations are posted")
	clearance := fs.String("clearance", "", "public, internal or personal: the most restricted fields the channel may show")
	installation := fs.String("installation", "", "installation id (default: the tenant's newest)")
	clear := fs.Bool("clear", false, "remove the escalation destination (escalations are then not posted)")
	show := fs.Bool("show", false, "print the current escalation destination")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		if *show {
			d, err := a.Slack.EscalationDestination(ctx, t)
			if errors.Is(err, domain.ErrNotFound) {
				return printJSON(stdout, map[string]any{"escalation_destination": nil})
			}
			if err != nil {
				return err
			}
			return printJSON(stdout, escalationView(d))
		}
		if !*clear && (*ch == "" || *clearance == "") {
			return errors.New("missing required flag --channel and --clearance (or --clear)")
		}
		d, err := a.Slack.SetEscalationDestination(ctx, slackinstall.EscalationRequest{Tenant: t, Channel: *ch, Clearance: *clearance,
			Installation: *installation, By: string(cliActor(t).ID), Clear: *clear})
		if err != nil {
			return err
		}
		if *clear {
			return printJSON(stdout, map[string]any{"escalation_destination": nil})
		}
		return printJSON(stdout, escalationView(d))
	})
}

func escalationView(d slackinstall.Destination) map[string]any {
	v := map[string]any{"channel": d.Channel, "clearance": d.ClearanceStr, "installation_id": d.Installation.ID}
	if d.Checked != "" {
		v["checked"] = d.Checked
	}
	return v
}
