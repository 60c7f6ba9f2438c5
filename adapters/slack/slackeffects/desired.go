package slackeffects

import (
	"context"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/projections"
)

// Desired is an inquiry's Slack output version that RaiseDesired records.
type Desired struct {
	Tenant  domain.TenantID
	Inquiry domain.InquiryID
	Version uint64
}

// RaiseDesired records, in an intents projection's batch, that each inquiry's Slack output must
// show at least its version, in a table keyed by (tenant_id, inquiry_id) with a desired_version
// column; the version never goes down. rows must not name an inquiry twice. It writes with the
// batch's multi-row statements (projections.Batch.ExecRows), not one statement per inquiry, sent
// with the batch's commit (ExecRowsAtCommit): the batch must not read the versions back.
func RaiseDesired(ctx context.Context, b *projections.Batch, table string, rows []Desired) error {
	args := make([]any, 0, 3*len(rows))
	for _, d := range rows {
		args = append(args, string(d.Tenant), string(d.Inquiry), int64(d.Version))
	}
	return b.ExecRowsAtCommit(ctx, `INSERT INTO `+table+` (`+desiredCols+`)`,
		` ON CONFLICT (tenant_id, inquiry_id) DO UPDATE SET desired_version = CASE WHEN `+table+`.desired_version > excluded.desired_version
		THEN `+table+`.desired_version ELSE excluded.desired_version END`, desiredTypes, args)
}

// desiredCols are the columns of the rows RaiseDesired writes, in their order.
var desiredCols, desiredTypes = projections.Columns("tenant_id text, inquiry_id text, desired_version bigint")
