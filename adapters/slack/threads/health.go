package threads

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/casebook/casebook/domain"
)

// Health is an inquiry's thread state: "saved; Slack pending/failed".
type Health struct {
	State           string     `json:"state"` // pending, synced, failed or disabled
	DesiredVersion  uint64     `json:"desired_version"`
	ObservedVersion uint64     `json:"observed_version"`
	Channel         string     `json:"channel,omitempty"`
	LastSuccess     *time.Time `json:"last_success,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	ErrorClass      string     `json:"error_class,omitempty"`
}

// HealthWithoutOutcome is Health's answer for an inquiry with no recorded effect outcome, from its
// thread row's versions and channel (zero without a row) and whether its tenant has an active
// destination.
func HealthWithoutOutcome(desired, observed uint64, channel string, hasDestination bool) Health {
	h := Health{DesiredVersion: desired, ObservedVersion: observed, Channel: channel}
	h.State = h.state(hasDestination)
	return h
}

// state decides the state from the versions, the last outcome and whether a destination exists.
func (h Health) state(has bool) string {
	switch {
	case h.DesiredVersion > 0 && h.ObservedVersion >= h.DesiredVersion:
		return "synced"
	case !has && h.ObservedVersion == 0:
		return "disabled"
	case h.LastError != "":
		return "failed"
	default:
		return "pending"
	}
}

// Health reads an inquiry's thread state. Versions come from the slackintents projection (desired
// from the inquiry stream, observed from thread events); the last outcome from the runtime.
func (w *Worker) Health(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (Health, error) {
	var h Health
	var desired, observed sql.NullInt64
	var channel sql.NullString
	db := w.Effects.DB
	err := db.QueryRowContext(ctx, db.Rebind(`SELECT desired_version, observed_version, channel_id FROM slack_threads
		WHERE tenant_id = ? AND inquiry_id = ?`), tenant, id).Scan(&desired, &observed, &channel)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return h, err
	}
	h.DesiredVersion, h.ObservedVersion, h.Channel = uint64(desired.Int64), uint64(observed.Int64), channel.String
	hs, err := w.Effects.Health(ctx, tenant, id, SyncArgs{}.Kind())
	if err != nil {
		return h, err
	}
	if len(hs) > 0 {
		last := hs[0]
		if !last.LastSuccess.IsZero() {
			t := last.LastSuccess
			h.LastSuccess = &t
		}
		h.LastError, h.ErrorClass = last.LastError, string(last.ErrorClass)
	}
	has, err := w.install().HasDestination(ctx, db, tenant)
	if err != nil {
		return h, err
	}
	h.State = h.state(has)
	return h, nil
}

// ThreadByRoot finds the inquiry whose stored root message is (installation key, channel, ts)
// inside tenant. Anything else, a well-formed id of another workspace included, is
// domain.ErrNotFound.
func (w *Worker) ThreadByRoot(ctx context.Context, tenant domain.TenantID, key, channel, ts string) (domain.InquiryID, error) {
	var id domain.InquiryID
	if tenant == "" || key == "" || channel == "" || ts == "" {
		return "", fmt.Errorf("thread: %w", domain.ErrNotFound)
	}
	db := w.Effects.DB
	err := db.QueryRowContext(ctx, db.Rebind(`SELECT inquiry_id FROM slack_threads
		WHERE tenant_id = ? AND installation = ? AND channel_id = ? AND root_ts = ?`), tenant, key, channel, ts).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("thread: %w", domain.ErrNotFound)
	}
	return id, err
}
