package slackinstall

import (
	"context"
	"encoding/json"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// Actor is the principal Slack events are recorded as.
const Actor = "system:slack"

// SlackInstalled is the audit event of an install or reinstall (installation-{tenant} stream).
type SlackInstalled struct {
	InstallationID string `json:"installation_id"`
	Key            string `json:"key"`
	EnterpriseID   string `json:"enterprise_id,omitempty"`
	TeamID         string `json:"team_id"`
	AppID          string `json:"app_id,omitempty"`
	Replaces       string `json:"replaces,omitempty"`
}

// SlackDestinationSet is the audit event of a destination change (installation-{tenant} stream).
type SlackDestinationSet struct {
	DestinationID  string `json:"destination_id"`
	Team           string `json:"team,omitempty"`
	InstallationID string `json:"installation_id"`
	Channel        string `json:"channel"`
	Clearance      string `json:"clearance"`
	Replaces       string `json:"replaces,omitempty"`
}

// SlackInstallLinkIssued is the audit event of a one-time install link (installation-{tenant}
// stream): who asked and until when it opens. The link itself is never recorded.
type SlackInstallLinkIssued struct {
	ExpiresAt time.Time `json:"expires_at"`
}

// InstallationStream names a tenant's installation audit stream.
func InstallationStream(tenant domain.TenantID) string {
	return eventstore.KindInstallation.Tenant(tenant)
}

// AppendEvent appends one event to a Slack stream. It is the one writer of Slack events
// (installation audit here; effect events through slackeffects): the event id is derived from
// commandID, so an append retried after an unknown outcome is recognised by the store.
func AppendEvent(ctx context.Context, store eventstore.Store, stream string, exp eventstore.ExpectedRevision,
	tenant domain.TenantID, actor, commandID string, now time.Time, typ string, payload any) (eventstore.AppendResult, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	meta, err := json.Marshal(domain.Metadata{TenantID: tenant, Actor: domain.PrincipalID(actor), CommandID: commandID,
		OccurredAt: now.UTC(), SchemaVersion: 1})
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	return store.Append(ctx, stream, exp, []eventstore.EventData{{
		ID: eventstore.DeterministicID(commandID, 0), Type: typ, Data: data, Metadata: meta,
	}})
}
