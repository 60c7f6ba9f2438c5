package callbacks

import (
	"context"
	"time"

	"github.com/casebook/casebook/internal/sqldb"
)

var seenMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS slack_events_seen (
	event_key TEXT   PRIMARY KEY,
	seen_at   BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS slack_events_seen_at ON slack_events_seen (seen_at)`}}

// DefaultRetention is how long an event id is remembered; Slack retries within about an hour.
const DefaultRetention = 24 * time.Hour

// Seen remembers delivered Events API ids for Retention, so a retried delivery applies once.
type Seen struct {
	DB        *sqldb.DB
	Now       func() time.Time
	Retention time.Duration
}

// NewSeen migrates the table and returns the store.
func NewSeen(ctx context.Context, db *sqldb.DB, now func() time.Time) (*Seen, error) {
	if err := sqldb.Migrate(ctx, db, "slack-callbacks", seenMigrations); err != nil {
		return nil, err
	}
	return &Seen{DB: db, Now: now, Retention: DefaultRetention}, nil
}

// Claim records key and reports whether it is new. It forgets keys older than Retention.
func (s *Seen) Claim(ctx context.Context, key string) (bool, error) {
	now := s.Now()
	if _, err := s.DB.ExecContext(ctx, s.DB.Rebind(`DELETE FROM slack_events_seen WHERE seen_at < ?`), now.Add(-s.Retention).UnixNano()); err != nil {
		return false, err
	}
	res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_events_seen (event_key, seen_at) VALUES (?, ?)
		ON CONFLICT (event_key) DO NOTHING`), key, now.UnixNano())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Release forgets key, so a retry of a delivery that failed is applied.
func (s *Seen) Release(ctx context.Context, key string) error {
	_, err := s.DB.ExecContext(ctx, s.DB.Rebind(`DELETE FROM slack_events_seen WHERE event_key = ?`), key)
	return err
}
