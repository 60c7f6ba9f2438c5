package app

import (
	"context"

	"github.com/casebook/casebook/commands"
)

// wireAudit opens the command audit on the app's database.
func (a *App) wireAudit(ctx context.Context) error {
	l, err := commands.NewAuditLog(ctx, a.DB)
	if err != nil {
		return err
	}
	a.Audit = l
	return nil
}

// audited is the command handler as adapters must use it: every command leaves an audit entry.
func (a *App) audited() commands.Executor {
	return &commands.Audited{Next: a.Commands, Sink: a.Audit, Now: a.Config.Now, Logger: a.Config.Logger}
}
