package main

import (
	"context"
	"io"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// eraseCmd is `casebook erase --tenant S --inquiry ID`: the same erasure as the admin API (tombstone,
// data key destroyed, query model anonymized, Slack thread and List row deleted by their effects),
// recorded with the CLI's admin actor and audited like every command. A legal hold refuses it.
func eraseCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("erase", stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	inquiry := fs.String("inquiry", "", required+"inquiry id")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		exec := &commands.Audited{Next: a.Commands, Sink: a.Audit, Now: a.Config.Now, Logger: a.Config.Logger}
		res, err := exec.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: t, InquiryID: domain.InquiryID(*inquiry),
			Actor: cliActor(t), CorrelationID: "cli"}, Policy: "request"})
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"id": res.InquiryID, "version": res.Version, "erased": true})
	})
}
