package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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

const retentionUsage = `usage:
  casebook retention set --tenant S --file policy.json   replace the tenant's retention policy (validated strictly)
  casebook retention show --tenant S                     print the tenant's retention policy
  casebook retention sweep [--dry-run [--at T]]          run the retention policy job once (every tenant) and print its report;
                                                         --dry-run erases nothing, --at previews what would be due at T`

// retentionCmd is `casebook retention set|show|sweep`.
func retentionCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "set" && args[0] != "show" && args[0] != "sweep") {
		return errors.New(retentionUsage)
	}
	fs, sf := newFlags("retention "+args[0], stderr)
	if args[0] == "sweep" {
		dry := fs.Bool("dry-run", false, "erase nothing; report what is due")
		at := fs.String("at", "", "with --dry-run: report what would be due at this RFC 3339 time (preview a policy)")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		opts := app.RetentionOptions{DryRun: *dry}
		if *at != "" {
			t, err := time.Parse(time.RFC3339, *at)
			if err != nil {
				return fmt.Errorf("retention sweep: --at: %w", err)
			}
			opts.At = t
		}
		a, err := sf.open(ctx, logger(stderr))
		if err != nil {
			return err
		}
		defer a.Close()
		rep, err := sweepOnce(ctx, a, opts)
		if err != nil {
			return err
		}
		return printJSON(stdout, rep)
	}
	return policyCmd(ctx, fs, sf, args, stdout, stderr, "tenant %s has no retention policy: nothing is erased by retention",
		func(a *app.App, t domain.TenantID) (any, error) {
			p, err := a.Commands.RetentionPolicy(ctx, t)
			return p, err
		},
		func(x commands.Executor, t domain.TenantID, doc []byte) (any, error) {
			p, _, err := x.SetRetentionPolicy(ctx, commands.SetRetentionPolicy{Tenant: t, Actor: cliActor(t), Policy: doc, CorrelationID: "cli"})
			return p, err
		})
}

// sweepOnce brings the privacy index up to the log's head, then sweeps once.
func sweepOnce(ctx context.Context, a *app.App, opts app.RetentionOptions) (app.RetentionReport, error) {
	if err := a.CatchUpPrivacy(ctx); err != nil {
		return app.RetentionReport{}, err
	}
	return a.RetentionSweep(ctx, opts)
}

// exportCmd is `casebook export --tenant S --email E [--out FILE]`: what Casebook holds about the
// person with that address, as JSON (stdout, or FILE created with mode 0600), found through the
// blind index and audited as requester_export by the CLI's admin.
func exportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("export", stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	email := fs.String("email", "", required+"the requester's email address (any case)")
	out := fs.String("out", "", "write the JSON to this new file (mode 0600) instead of stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		if err := a.CatchUpPrivacy(ctx); err != nil {
			return err
		}
		exp, err := a.ExportRequester(ctx, cliActor(t), "cli", *email)
		if err != nil {
			return err
		}
		if *out == "" {
			return printJSON(stdout, exp)
		}
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // the operator names the file
		if err != nil {
			return err
		}
		if err := printJSON(f, exp); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"out": *out, "inquiries": len(exp.Inquiries), "truncated": exp.Truncated})
	})
}
