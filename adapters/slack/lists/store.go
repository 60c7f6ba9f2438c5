package lists

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackproj"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// Activation states.
const (
	StateDisabled = "disabled"
	StateActive   = "active"
)

// Schema states.
const (
	SchemaUnknown = "unknown"
	SchemaOK      = "ok"
	SchemaDrifted = "drifted"
)

var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS slack_list_projections (
	tenant_id        TEXT   NOT NULL,
	list_id          TEXT   NOT NULL,
	team             TEXT   NOT NULL DEFAULT '',
	installation_id  TEXT   NOT NULL,
	clearance        TEXT   NOT NULL,
	remove_after_ns  BIGINT NOT NULL DEFAULT 0,
	state            TEXT   NOT NULL,
	schema_json      TEXT   NOT NULL DEFAULT '',
	fingerprint      TEXT   NOT NULL DEFAULT '',
	schema_state     TEXT   NOT NULL DEFAULT 'unknown',
	schema_reason    TEXT   NOT NULL DEFAULT '',
	last_probe_error TEXT   NOT NULL DEFAULT '',
	updated_at       BIGINT NOT NULL,
	cooldown_until   BIGINT NOT NULL DEFAULT 0,
	circuit_open     INTEGER NOT NULL DEFAULT 0,
	circuit_manual   INTEGER NOT NULL DEFAULT 0,
	circuit_reason   TEXT   NOT NULL DEFAULT '',
	next_probe_at    BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant_id, list_id)
);
CREATE TABLE IF NOT EXISTS slack_list_attempts (
	effect_key TEXT   PRIMARY KEY,
	created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS slack_list_sync_health (
	tenant_id     TEXT   NOT NULL,
	list_id       TEXT   NOT NULL,
	inquiry_id    TEXT   NOT NULL,
	last_success  BIGINT NOT NULL DEFAULT 0,
	last_error    TEXT   NOT NULL DEFAULT '',
	error_class   TEXT   NOT NULL DEFAULT '',
	PRIMARY KEY (tenant_id, list_id, inquiry_id)
)`}}

// Store keeps List projections' configuration and health. Installation tokens are read from
// slackproj's table and opened with its Sealer.
type Store struct {
	DB      *sqldb.DB
	Events  eventstore.Store
	Sealer  *slackproj.Sealer
	Markers *Markers
	Now     func() time.Time
	// HTTPClient is used for Slack calls; nil uses one with a 10 s timeout. slack-go's retry
	// option is never enabled: an items.create is never resent blindly.
	HTTPClient *http.Client
}

// NewStore migrates the tables and returns a store. slackproj's tables must exist.
func NewStore(ctx context.Context, db *sqldb.DB, events eventstore.Store, secret []byte, now func() time.Time) (*Store, error) {
	if err := sqldb.Migrate(ctx, db, "slacklists", migrations); err != nil {
		return nil, err
	}
	sealer, err := slackproj.NewSealer(secret)
	if err != nil {
		return nil, err
	}
	m, err := NewMarkers(secret)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Store{DB: db, Events: events, Sealer: sealer, Markers: m, Now: now}, nil
}

// Config is one List projection.
type Config struct {
	Tenant         domain.TenantID       `json:"tenant_id"`
	List           string                `json:"list_id"`
	Team           string                `json:"team,omitempty"`
	InstallationID string                `json:"installation_id"`
	Clearance      domain.Classification `json:"-"`
	ClearanceStr   string                `json:"clearance"`
	RemoveAfter    time.Duration         `json:"remove_after_ns"`
	State          string                `json:"state"`
	Schema         Schema                `json:"schema"`
	SchemaState    string                `json:"schema_state"`
	SchemaReason   string                `json:"schema_reason,omitempty"`
	LastProbeError string                `json:"last_probe_error,omitempty"`
}

const configCols = `tenant_id, list_id, team, installation_id, clearance, remove_after_ns, state, schema_json, schema_state, schema_reason, last_probe_error`

func scanConfig(sc interface{ Scan(...any) error }) (Config, error) {
	var c Config
	var rem int64
	var sj string
	if err := sc.Scan(&c.Tenant, &c.List, &c.Team, &c.InstallationID, &c.ClearanceStr, &rem, &c.State, &sj, &c.SchemaState, &c.SchemaReason, &c.LastProbeError); err != nil {
		return Config{}, err
	}
	c.RemoveAfter = time.Duration(rem)
	if sj != "" {
		if err := json.Unmarshal([]byte(sj), &c.Schema); err != nil {
			return Config{}, err
		}
	}
	cl, err := slackproj.ParseClearance(c.ClearanceStr)
	c.Clearance = cl
	return c, err
}

// Config returns a List projection; domain.ErrNotFound when none was ever set up.
func (s *Store) Config(ctx context.Context, tenant domain.TenantID, list string) (Config, error) {
	c, err := scanConfig(s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT `+configCols+` FROM slack_list_projections WHERE tenant_id = ? AND list_id = ?`), tenant, list))
	if errors.Is(err, sql.ErrNoRows) {
		return Config{}, fmt.Errorf("list projection: %w", domain.ErrNotFound)
	}
	return c, err
}

// Configs returns a tenant's List projections.
func (s *Store) Configs(ctx context.Context, tenant domain.TenantID) ([]Config, error) {
	rows, err := s.DB.QueryContext(ctx, s.DB.Rebind(`SELECT `+configCols+` FROM slack_list_projections WHERE tenant_id = ? ORDER BY list_id`), tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Config{}
	for rows.Next() {
		c, err := scanConfig(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// activeLists returns the ids of a tenant's active List projections, inside q (a batch's tx).
func activeLists(ctx context.Context, db *sqldb.DB, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, tenant domain.TenantID) ([]string, []time.Duration, error) {
	rows, err := q.QueryContext(ctx, db.Rebind(`SELECT list_id, remove_after_ns FROM slack_list_projections WHERE tenant_id = ? AND state = ? ORDER BY list_id`), tenant, StateActive)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var ids []string
	var rem []time.Duration
	for rows.Next() {
		var id string
		var r int64
		if err := rows.Scan(&id, &r); err != nil {
			return nil, nil, err
		}
		ids, rem = append(ids, id), append(rem, time.Duration(r))
	}
	return ids, rem, rows.Err()
}

// client returns a slack-go client for the projection's installation (no automatic retries).
func (s *Store) client(ctx context.Context, tenant domain.TenantID, installation string) (*slack.Client, error) {
	var apiURL, sealed string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT api_url, token_sealed FROM slack_installations WHERE tenant_id = ? AND id = ? AND active = 1`),
		tenant, installation).Scan(&apiURL, &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("installation: %w", domain.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	tok, err := s.Sealer.Open(sealed, installation+"/token")
	if err != nil {
		return nil, err
	}
	hc := s.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return slack.New(tok, slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(hc)), nil
}

// newestInstallation returns the tenant's newest active installation id.
func (s *Store) newestInstallation(ctx context.Context, tenant domain.TenantID) (string, error) {
	var id string
	err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT id FROM slack_installations WHERE tenant_id = ? AND active = 1
		ORDER BY installed_at DESC LIMIT 1`), tenant).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", domain.Invalid("tenant", "has no Slack installation: run casebook slack install first")
	}
	return id, err
}

// ProjectionStream names a List projection's audit stream.
func ProjectionStream(tenant domain.TenantID, list string) string {
	return "listprojection-" + string(tenant) + "-" + list
}

func (s *Store) appendEvent(ctx context.Context, stream string, exp eventstore.ExpectedRevision, tenant domain.TenantID, commandID, typ string, payload any) (eventstore.AppendResult, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	meta, err := json.Marshal(domain.Metadata{TenantID: tenant, Actor: "system:slack-lists", CommandID: commandID,
		OccurredAt: s.Now().UTC(), SchemaVersion: 1})
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	return s.Events.Append(ctx, stream, exp, []eventstore.EventData{{
		ID: eventstore.DeterministicID(commandID, 0), Type: typ, Data: data, Metadata: meta,
	}})
}

// audit appends an event to the List projection's stream.
func (s *Store) audit(ctx context.Context, tenant domain.TenantID, list, typ string, payload any) error {
	_, err := s.appendEvent(ctx, ProjectionStream(tenant, list), eventstore.Any(), tenant,
		fmt.Sprintf("lists:%s:%s:%s:%d", tenant, list, typ, s.Now().UnixNano()), typ, payload)
	return err
}

func (s *Store) exec(ctx context.Context, q string, args ...any) error {
	_, err := s.DB.ExecContext(ctx, s.DB.Rebind(q), args...)
	return err
}

// gate returns how long a job for the List must wait: its 429 cooldown, or an open circuit until
// its next probe (a manual circuit, e.g. over_row_maximum, waits for an operator).
func (s *Store) gate(ctx context.Context, c Config, probeEvery time.Duration) (time.Duration, error) {
	var cooldown, probeAt int64
	var open, manual int
	if err := s.DB.QueryRowContext(ctx, s.DB.Rebind(`SELECT cooldown_until, circuit_open, circuit_manual, next_probe_at FROM slack_list_projections
		WHERE tenant_id = ? AND list_id = ?`), c.Tenant, c.List).Scan(&cooldown, &open, &manual, &probeAt); err != nil {
		return 0, err
	}
	now := s.Now().UnixNano()
	if open == 1 {
		if manual == 1 {
			return probeEvery, nil
		}
		if now < probeAt {
			return time.Duration(probeAt - now), nil
		}
		res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_list_projections SET next_probe_at = ?
			WHERE tenant_id = ? AND list_id = ? AND next_probe_at = ?`), now+int64(probeEvery), c.Tenant, c.List, probeAt)
		if err != nil {
			return 0, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return probeEvery, nil
		}
	}
	if now < cooldown {
		return time.Duration(cooldown - now), nil
	}
	return 0, nil
}

// SetCooldown makes every job of the List wait until until (never shortening a longer one).
func (s *Store) SetCooldown(ctx context.Context, tenant domain.TenantID, list string, until time.Time) error {
	return s.exec(ctx, `UPDATE slack_list_projections SET cooldown_until = CASE WHEN cooldown_until > ? THEN cooldown_until ELSE ? END
		WHERE tenant_id = ? AND list_id = ?`, until.UnixNano(), until.UnixNano(), tenant, list)
}

func (s *Store) openCircuit(ctx context.Context, c Config, reason string, manual bool, probeEvery time.Duration) error {
	m := 0
	if manual {
		m = 1
	}
	return s.exec(ctx, `UPDATE slack_list_projections SET circuit_open = 1, circuit_manual = ?, circuit_reason = ?, next_probe_at = ?
		WHERE tenant_id = ? AND list_id = ?`, m, reason, s.Now().Add(probeEvery).UnixNano(), c.Tenant, c.List)
}

func (s *Store) closeCircuitAfterSuccess(ctx context.Context, c Config) error {
	return s.exec(ctx, `UPDATE slack_list_projections SET circuit_open = 0, circuit_reason = '' WHERE tenant_id = ? AND list_id = ? AND circuit_open = 1 AND circuit_manual = 0`,
		c.Tenant, c.List)
}

// CloseCircuit is an operator's decision (after freeing rows under the cap, fixing access, …).
func (s *Store) CloseCircuit(ctx context.Context, tenant domain.TenantID, list string) error {
	res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_list_projections SET circuit_open = 0, circuit_manual = 0, circuit_reason = '', next_probe_at = 0
		WHERE tenant_id = ? AND list_id = ? AND circuit_open = 1`), tenant, list)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("open circuit: %w", domain.ErrNotFound)
	}
	return nil
}

// claimAttempt records that an items.create for key is about to happen: fresh when none was
// recorded; an earlier one is re-claimed (reconcile) only once older than stale.
func (s *Store) claimAttempt(ctx context.Context, key string, stale time.Duration) (fresh, reconcile bool, err error) {
	now := s.Now().UnixNano()
	res, err := s.DB.ExecContext(ctx, s.DB.Rebind(`INSERT INTO slack_list_attempts (effect_key, created_at) VALUES (?, ?) ON CONFLICT (effect_key) DO NOTHING`), key, now)
	if err != nil {
		return false, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, false, nil
	}
	res, err = s.DB.ExecContext(ctx, s.DB.Rebind(`UPDATE slack_list_attempts SET created_at = ? WHERE effect_key = ? AND created_at <= ?`), now, key, now-int64(stale))
	if err != nil {
		return false, false, err
	}
	n, _ := res.RowsAffected()
	return false, n == 1, nil
}

func (s *Store) releaseAttempt(ctx context.Context, key string) error {
	return s.exec(ctx, `DELETE FROM slack_list_attempts WHERE effect_key = ?`, key)
}

func (s *Store) recordSuccess(ctx context.Context, tenant domain.TenantID, list string, id domain.InquiryID) error {
	return s.exec(ctx, `INSERT INTO slack_list_sync_health (tenant_id, list_id, inquiry_id, last_success) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant_id, list_id, inquiry_id) DO UPDATE SET last_success = excluded.last_success, last_error = '', error_class = ''`,
		tenant, list, id, s.Now().UnixNano())
}

func (s *Store) recordError(ctx context.Context, tenant domain.TenantID, list string, id domain.InquiryID, class, msg string) error {
	return s.exec(ctx, `INSERT INTO slack_list_sync_health (tenant_id, list_id, inquiry_id, last_error, error_class) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant_id, list_id, inquiry_id) DO UPDATE SET last_error = excluded.last_error, error_class = excluded.error_class`,
		tenant, list, id, msg, class)
}
