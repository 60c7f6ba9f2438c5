package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
)

// slackLinkUser links a Slack user of the tenant's installation to one of the tenant's
// principals: Slack clicks by that user then act as the principal.
func slackLinkUser(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("slack link-user", stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	user := fs.String("slack-user", "", required+"Slack user id (U…)")
	principal := fs.String("principal", "", required+"principal id of the tenant")
	installation := fs.String("installation", "", "installation id (default: the tenant's newest)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		p, err := a.Tenancy.Principal(ctx, t, domain.PrincipalID(*principal))
		if errors.Is(err, domain.ErrNotFound) {
			return fmt.Errorf("principal %q is not a principal of tenant %q", *principal, *tenant)
		}
		if err != nil {
			return err
		}
		key, err := a.Slack.LinkUser(ctx, t, *installation, *user, p.ID)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]string{"installation": key, "slack_user": *user, "principal_id": string(p.ID)})
	})
}
