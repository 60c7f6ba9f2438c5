package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
)

const listsReconcileUsage = `usage:
  casebook lists reconcile --tenant S --list F… [--dry-run] [--page-limit N] [--max-reads N] [--max-writes N] [--read-every D]
      sweep the List's active and archived rows now; prints the run's report (outcome counts, actions, coverage) as JSON
  casebook lists working-set --tenant S --list F… --max N
      bound the List's rows (0: 90% of the plan's row cap); over it, resolved rows go first, then the lowest priority, oldest first`

// listsReconcileCmd runs one reconcile of a List, or sets its working-set bound, within one tenant.
// A second reconcile of the same List while one runs (here or in a server) exits with a conflict.
func listsReconcileCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("lists "+args[0], stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	list := fs.String("list", "", required+"List id (F…)")
	var run func(a *app.App, t domain.TenantID) (any, error)
	switch args[0] {
	case "reconcile":
		dry := fs.Bool("dry-run", false, "classify and report; write nothing in Slack or Casebook")
		pageLimit := fs.Int("page-limit", 100, "items.list page size")
		maxReads := fs.Int("max-reads", 200, "items.list pages this run may read; a run that reaches it is incomplete")
		maxWrites := fs.Int("max-writes", 100, "Slack writes this run may make; the rest waits for the next run")
		readEvery := fs.Duration("read-every", 3*time.Second, "spacing of reads (items.list is Tier 2); 0 reads without pause")
		run = func(a *app.App, t domain.TenantID) (any, error) {
			r := *a.Lists.Reconciler
			r.PageLimit, r.Budget.MaxReads, r.Budget.MaxWrites, r.Budget.ReadEvery = *pageLimit, *maxReads, *maxWrites, *readEvery
			if *readEvery == 0 {
				r.Budget.ReadEvery = -1
			}
			return r.Run(ctx, t, *list, *dry)
		}
	case "working-set":
		n := fs.Int("max", -1, required+"the List's bound on rows")
		run = func(a *app.App, t domain.TenantID) (any, error) {
			if err := a.Lists.Store.SetWorkingSetMax(ctx, t, *list, *n); err != nil {
				return nil, err
			}
			return map[string]int{"working_set_max": *n}, nil
		}
	default:
		return errors.New(listsReconcileUsage)
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
