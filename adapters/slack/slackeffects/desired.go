package slackeffects

import (
	"context"
	"strings"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/projections"
)

// Desired is an inquiry's Slack output version that RaiseDesired records.
type Desired struct {
	Tenant  domain.TenantID
	Inquiry domain.InquiryID
	Version uint64
}

// desiredChunk is the most rows one RaiseDesired statement carries.
const desiredChunk = 256

// RaiseDesired records, in an intents projection's batch, that each inquiry's Slack output must
// show at least its version, in a table keyed by (tenant_id, inquiry_id) with a desired_version
// column; the version never goes down. rows must not name an inquiry twice. It writes with one
// statement per 256 rows, padded with NULL rows (filtered out) to a power of two, so a few
// statement texts serve every batch size.
func RaiseDesired(ctx context.Context, b *projections.Batch, table string, rows []Desired) error {
	for len(rows) > 0 {
		part := rows[:min(len(rows), desiredChunk)]
		rows = rows[len(part):]
		size := 1
		for size < len(part) {
			size *= 2
		}
		args := make([]any, 0, 3*size)
		for _, d := range part {
			args = append(args, string(d.Tenant), string(d.Inquiry), int64(d.Version))
		}
		for range size - len(part) {
			args = append(args, nil, nil, nil)
		}
		values := strings.Repeat(`(?, ?, CAST(? AS BIGINT)), `, size)
		if err := b.Exec(ctx, `INSERT INTO `+table+` (tenant_id, inquiry_id, desired_version)
			SELECT column1, column2, column3 FROM (VALUES `+values[:len(values)-2]+`) AS v WHERE column1 IS NOT NULL
			ON CONFLICT (tenant_id, inquiry_id) DO UPDATE SET desired_version = CASE WHEN `+table+`.desired_version > excluded.desired_version
			THEN `+table+`.desired_version ELSE excluded.desired_version END`, args...); err != nil {
			return err
		}
	}
	return nil
}
