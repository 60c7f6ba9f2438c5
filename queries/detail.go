package queries

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/casebook/casebook/domain"
)

// DetailParts selects what Detail reads beside the inquiry: its clock and due jobs (Due), its
// Slack state (Slack) and its attachments (Attachments).
type DetailParts struct {
	Slack, Due, Attachments bool
}

// Detail is an inquiry as the detail view starts from it, read in one statement: the inquiry, its
// clock, and whether each other part holds anything for it. A part found empty needs no read of
// its own; one that holds something is read by its owner as before. Every part is read within
// the inquiry's tenant: another tenant's rows, whatever their ids, count for nothing.
type Detail struct {
	Inquiry Inquiry
	// Clock is nil when Due was not asked for or the schedules projection has no clock for the
	// inquiry (yet).
	Clock *Clock
	// DueJobs: the inquiry has pending or claimed due jobs.
	DueJobs bool
	Slack   SlackPresence
	// Attachments: the inquiry has attachments.
	Attachments bool
}

// SlackPresence is an inquiry's Slack state as Detail reads it: its thread row (slackintents)
// and whether anything else holds Slack state for it.
type SlackPresence struct {
	// The inquiry's thread row's versions and channel (zero without a row).
	Desired, Observed uint64
	Channel           string
	// Outcome: an effect outcome (success or failure) is recorded for the inquiry.
	Outcome bool
	// Destination: its tenant has an active Slack destination.
	Destination bool
	// Lists: its tenant has a List projection, active or not.
	Lists bool
}

// qualified prefixes each of a comma-separated column list with alias.
func qualified(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

var (
	inquiryColumnsQ = qualified("q", columns)
	clockColumnsQ   = qualified("c", clockColumns)
)

// detailSQL is Detail's statement for parts and its arguments. Every part is bound to the
// caller's tenant and id as parameters, not to the inquiry row's columns: the query model's key
// columns collate as "C" and the other tables' as the database default, so a join on the columns
// compares under "C" and cannot use those tables' keys (a scan per read, 1 ms at 5,000 inquiries).
func detailSQL(parts DetailParts, tenant domain.TenantID, id domain.InquiryID) (string, []any) {
	var b strings.Builder
	var args []any
	// key binds the tenant and, unless tenantOnly, the id: "alias.tenant_id = ? AND alias.inquiry_id = ?".
	key := func(alias string, tenantOnly bool) string {
		args = append(args, tenant)
		if tenantOnly {
			return alias + `.tenant_id = ?`
		}
		args = append(args, id)
		return alias + `.tenant_id = ? AND ` + alias + `.inquiry_id = ?`
	}
	b.WriteString(`SELECT ` + inquiryColumnsQ)
	if parts.Due {
		b.WriteString(`, c.inquiry_id IS NOT NULL, ` + clockColumnsQ + `,
	EXISTS (SELECT 1 FROM due_jobs j WHERE ` + key("j", false) + ` AND j.state IN ('pending', 'claimed'))`)
	}
	if parts.Slack {
		b.WriteString(`, t.desired_version, t.observed_version, t.channel_id,
	EXISTS (SELECT 1 FROM slack_effect_health h WHERE ` + key("h", false) + `),
	EXISTS (SELECT 1 FROM slack_destinations d WHERE ` + key("d", true) + ` AND d.active = 1),
	EXISTS (SELECT 1 FROM slack_list_projections l WHERE ` + key("l", true) + `)`)
	}
	if parts.Attachments {
		b.WriteString(`,
	EXISTS (SELECT 1 FROM inquiry_attachments a WHERE ` + key("a", false) + `)`)
	}
	b.WriteString(`
FROM qm_inquiries q`)
	if parts.Due {
		b.WriteString(` LEFT JOIN sla_clock c ON ` + key("c", false))
	}
	if parts.Slack {
		b.WriteString(` LEFT JOIN slack_threads t ON ` + key("t", false))
	}
	args = append(args, tenant, id)
	b.WriteString(` WHERE q.tenant_id = ? AND q.id = ?`)
	return b.String(), args
}

// Detail returns one inquiry with its personal fields, its clock and what its other parts hold, in
// one statement; domain.ErrNotFound if the tenant has no such id.
func (r *Reader) Detail(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, parts DetailParts) (Detail, error) {
	var d Detail
	var hasClock bool
	var due, next, frDue, resDue, fr sql.NullInt64
	var breached, watchers, team sql.NullString
	var level, desired, observed sql.NullInt64
	var channel sql.NullString
	var extra []any
	if parts.Due {
		extra = append(extra, &hasClock, &due, &next, &frDue, &resDue, &fr, &breached, &level, &watchers, &team, &d.DueJobs)
	}
	if parts.Slack {
		extra = append(extra, &desired, &observed, &channel, &d.Slack.Outcome, &d.Slack.Destination, &d.Slack.Lists)
	}
	if parts.Attachments {
		extra = append(extra, &d.Attachments)
	}
	query, args := detailSQL(parts, tenant, id)
	q, err := scanInquiry(rowWith{r.DB.QueryRowContext(ctx, r.DB.Rebind(query), args...), extra}, true)
	if errors.Is(err, sql.ErrNoRows) {
		return Detail{}, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Detail{}, err
	}
	d.Inquiry = q
	d.Slack.Desired, d.Slack.Observed, d.Slack.Channel = uint64(desired.Int64), uint64(observed.Int64), channel.String
	if hasClock {
		// A clock that does not decode is left out, as the detail view leaves out one it cannot read.
		if c, err := (Clock{EscalationLevel: int(level.Int64), Team: team.String}).fill(due, next, frDue, resDue, fr, breached.String, watchers.String); err == nil {
			d.Clock = &c
		}
	}
	return d, nil
}

// rowWith scans a row whose first columns scanInquiry reads and whose remaining ones go to extra.
type rowWith struct {
	row   *sql.Row
	extra []any
}

func (r rowWith) Scan(dest ...any) error { return r.row.Scan(append(dest, r.extra...)...) }
