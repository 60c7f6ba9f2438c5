package slackeffects

import (
	"context"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/projections"
)

// RaiseDesired records, in an intents projection's batch, that an inquiry's Slack output must
// show at least version v, in a table keyed by (tenant_id, inquiry_id) with a desired_version
// column; the version never goes down.
func RaiseDesired(ctx context.Context, b *projections.Batch, table string, tenant domain.TenantID, id domain.InquiryID, v uint64) error {
	return b.Exec(ctx, `INSERT INTO `+table+` (tenant_id, inquiry_id, desired_version) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id, inquiry_id) DO UPDATE SET desired_version = CASE WHEN `+table+`.desired_version > excluded.desired_version
		THEN `+table+`.desired_version ELSE excluded.desired_version END`, tenant, id, v)
}
