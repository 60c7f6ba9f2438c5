package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
)

const listsUsage = `usage:
  casebook lists create --tenant S --name N --clearance public|internal|personal [--channel C…] [--viewer U…]… [--owner U…] [--team T] [--remove-after D]
                                                     create a List with Casebook's columns, grant access, activate it
  casebook lists activate --tenant S --list F… [--team T] --clearance public|internal|personal [--remove-after D]
  casebook lists deactivate --tenant S --list F…
  casebook lists check --tenant S --list F…          re-read the schema; drift fails closed
  casebook lists circuit-close --tenant S --list F…
  casebook lists status --tenant S                   activation, schema, sync health, cooldown, reconcile watermarks and last run (JSON)
  casebook lists reconcile --tenant S --list F… [--dry-run]   sweep now; outcome counts as JSON
  casebook lists working-set --tenant S --list F… --max N     bound the List's rows`

// listsCmd manages Slack List projections, always within one tenant. Lists start disabled.
func listsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(listsUsage)
	}
	if args[0] == "reconcile" || args[0] == "working-set" {
		return listsReconcileCmd(ctx, args, stdout, stderr)
	}
	fs, sf := newFlags("lists "+args[0], stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	list := fs.String("list", "", "List id (F…)")
	var run func(a *app.App, t domain.TenantID) (any, error)
	switch args[0] {
	case "create":
		name := fs.String("name", "", required+"the List's name in Slack")
		clearance := fs.String("clearance", "", required+"public, internal or personal: the most restricted fields the List may show")
		channel := fs.String("channel", "", "channel whose members may read the List")
		var viewers []string
		fs.Func("viewer", "Slack user who may read the List (repeat, or comma-separated)", func(v string) error {
			viewers = append(viewers, splitList(v)...)
			return nil
		})
		owner := fs.String("owner", "", "Slack user who owns the List (default: the bot; the bot keeps write access)")
		team := fs.String("team", "", "team whose inquiries go there (default: the whole tenant)")
		removeAfter := fs.Duration("remove-after", 24*time.Hour, "how long a resolved or cancelled inquiry's row stays")
		run = func(a *app.App, t domain.TenantID) (any, error) {
			return a.Lists.Store.Create(ctx, lists.CreateRequest{Tenant: t, Name: *name, Clearance: *clearance, Channel: *channel,
				Viewers: viewers, Owner: *owner, Team: *team, RemoveAfter: *removeAfter})
		}
	case "activate":
		team := fs.String("team", "", "team whose inquiries go there (default: the whole tenant)")
		clearance := fs.String("clearance", "", "public, internal or personal: the most restricted fields the List may show")
		removeAfter := fs.Duration("remove-after", 24*time.Hour, "how long a resolved or cancelled inquiry's row stays")
		run = func(a *app.App, t domain.TenantID) (any, error) {
			return a.Lists.Store.Activate(ctx, lists.ActivateRequest{Tenant: t, List: *list, Team: *team, Clearance: *clearance, RemoveAfter: *removeAfter})
		}
	case "deactivate":
		run = func(a *app.App, t domain.TenantID) (any, error) { return a.Lists.Store.Deactivate(ctx, t, *list) }
	case "check":
		run = func(a *app.App, t domain.TenantID) (any, error) { return a.Lists.Store.CheckSchema(ctx, t, *list) }
	case "circuit-close":
		run = func(a *app.App, t domain.TenantID) (any, error) {
			_, err := a.Effects.Guard.CloseCircuit(ctx, t, *list)
			return map[string]bool{"closed": err == nil}, err
		}
	case "status":
		run = func(a *app.App, t domain.TenantID) (any, error) { return a.Lists.Store.Statuses(ctx, t) }
	default:
		return errors.New(listsUsage)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		v, err := run(a, t)
		if err != nil {
			return err
		}
		return printJSON(stdout, v)
	})
}
