package slackinstall

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

// A tenant's escalation destination: the channel where InquiryEscalated is posted (a new
// top-level message per escalation), with its own clearance. It is a setting apart from the
// thread destinations: escalations go to whoever is on call for them, usually a narrower audience.

var escalationMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS slack_escalation_destinations (
	tenant_id       TEXT   NOT NULL PRIMARY KEY,
	install_key     TEXT   NOT NULL,
	channel_id      TEXT   NOT NULL,
	clearance       TEXT   NOT NULL,
	set_by          TEXT   NOT NULL,
	set_at          BIGINT NOT NULL
)`}}

// SlackEscalationDestinationSet is the audit event of an escalation destination change
// (installation-{tenant} stream); By is the principal (or cli:<user>) who made it. Cleared: the
// tenant has no escalation destination any more.
type SlackEscalationDestinationSet struct {
	InstallationID string `json:"installation_id,omitempty"`
	Channel        string `json:"channel,omitempty"`
	Clearance      string `json:"clearance,omitempty"`
	By             string `json:"by"`
	Cleared        bool   `json:"cleared,omitempty"`
}

// EscalationRequest sets (or, with Clear, removes) a tenant's escalation destination.
type EscalationRequest struct {
	Tenant    domain.TenantID
	Channel   string
	Clearance string
	// Installation picks one when the tenant has several; "" takes the newest active one.
	Installation string
	// By names who asks, for the audit event: a principal id or cli:<user>. Required.
	By    string
	Clear bool
}

// SetEscalationDestination records r and its audit event. Validation errors name the field. Like
// SetDestination it asks Slack first (conversations.info): a channel Slack does not know, an
// archived one or one without the bot is refused with how to invite it; when Slack cannot answer
// the destination is set and Checked says it was not checked.
func (s *Store) SetEscalationDestination(ctx context.Context, r EscalationRequest) (Destination, error) {
	if r.By == "" {
		return Destination{}, domain.Invalid("by", "is required: the change is audited")
	}
	ev := SlackEscalationDestinationSet{By: r.By, Cleared: r.Clear}
	var d Destination
	if r.Clear {
		if _, err := s.DB.ExecContext(ctx, s.DB.Rebind(`DELETE FROM slack_escalation_destinations WHERE tenant_id = ?`), r.Tenant); err != nil {
			return Destination{}, err
		}
	} else {
		in, cl, err := s.destinationTarget(ctx, r.Tenant, r.Clearance, r.Channel, r.Installation)
		if err != nil {
			return Destination{}, err
		}
		checked, err := s.checkChannel(ctx, in, r.Channel)
		if err != nil {
			return Destination{}, err
		}
		d = Destination{Tenant: r.Tenant, Installation: in, Channel: r.Channel, Clearance: cl, ClearanceStr: r.Clearance, Checked: checked}
		if _, err := s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_escalation_destinations (tenant_id, install_key, channel_id,
			clearance, set_by, set_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET install_key = excluded.install_key,
			channel_id = excluded.channel_id, clearance = excluded.clearance, set_by = excluded.set_by, set_at = excluded.set_at`),
			r.Tenant, in.Key, r.Channel, r.Clearance, r.By, s.Now().UnixNano()); err != nil {
			return Destination{}, err
		}
		ev.InstallationID, ev.Channel, ev.Clearance = in.ID, r.Channel, r.Clearance
	}
	_, err := AppendEvent(ctx, s.Events, InstallationStream(r.Tenant), eventstore.Any(), r.Tenant, r.By,
		"slack-escalation:"+tenancy.NewID(), s.Now(), "SlackEscalationDestinationSet", ev)
	return d, err
}

// EscalationDestination returns a tenant's escalation destination; domain.ErrNotFound when it has
// none (escalations then make no Slack post) or its installation is no longer active. It is bound
// to the installation key, so a reinstall of the same app keeps it.
func (s *Store) EscalationDestination(ctx context.Context, tenant domain.TenantID) (Destination, error) {
	var d Destination
	var instID string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT i.id, e.channel_id, e.clearance FROM slack_escalation_destinations e
		JOIN slack_installations i ON i.install_key = e.install_key AND i.tenant_id = e.tenant_id AND i.active = 1
		WHERE e.tenant_id = ?`), tenant).Scan(&instID, &d.Channel, &d.ClearanceStr)
	if errors.Is(err, sql.ErrNoRows) {
		return Destination{}, fmt.Errorf("slack escalation destination: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Destination{}, err
	}
	return s.completeDestination(ctx, d, tenant, instID)
}

// HasEscalationDestination reports whether a tenant has an escalation destination, in q (a
// projection batch's transaction).
func (s *Store) HasEscalationDestination(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, tenant domain.TenantID) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, s.DB.Rebind(`SELECT count(*) FROM slack_escalation_destinations WHERE tenant_id = ?`), tenant).Scan(&n)
	return n > 0, err
}
