package lists

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
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
)`}, {Version: 2, SQL: `
INSERT INTO slack_effect_attempts (effect_key, created_at) SELECT effect_key, created_at FROM slack_list_attempts WHERE true
	ON CONFLICT (effect_key) DO NOTHING`}, {Version: 3, SQL: reconcileDDL}, {Version: 4, SQL: `
ALTER TABLE slack_list_projections ADD COLUMN access_json TEXT NOT NULL DEFAULT ''`}}

// The List's cooldown and circuit columns of slack_list_projections, slack_list_attempts and
// slack_list_sync_health are no longer written: the runtime's guard, ledger and health replaced
// them (version 2 carries create attempts still recorded over, so an upgrade never re-creates a
// row blindly).

// Actor is the principal List projection events are recorded as.
const Actor = "system:slack-lists"

// Store keeps List projections' configuration. Installations and their clients come from the
// registry (slackinstall); cooldowns, circuits and row health from the runtime (slackeffects).
type Store struct {
	DB      *sqldb.DB
	Events  eventstore.Store
	Install *slackinstall.Store
	Effects *slackeffects.Runtime
	Markers *Markers
	Now     func() time.Time
}

// NewStore migrates the tables and returns a store. The runtime's tables must exist.
func NewStore(ctx context.Context, rt *slackeffects.Runtime, secret []byte) (*Store, error) {
	if err := sqldb.Migrate(ctx, rt.DB, "slacklists", migrations); err != nil {
		return nil, err
	}
	m, err := NewMarkers(secret)
	if err != nil {
		return nil, err
	}
	return &Store{DB: rt.DB, Events: rt.Events, Install: rt.Install, Effects: rt, Markers: m, Now: rt.Now}, nil
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
	// Access is what Casebook set on a List it created (lists create); nil for a List made by hand.
	Access *Access `json:"access,omitempty"`
}

const configCols = `tenant_id, list_id, team, installation_id, clearance, remove_after_ns, state, schema_json, schema_state, schema_reason, last_probe_error, access_json`

func scanConfig(sc interface{ Scan(...any) error }) (Config, error) {
	var c Config
	var rem int64
	var sj, aj string
	if err := sc.Scan(&c.Tenant, &c.List, &c.Team, &c.InstallationID, &c.ClearanceStr, &rem, &c.State, &sj, &c.SchemaState, &c.SchemaReason, &c.LastProbeError, &aj); err != nil {
		return Config{}, err
	}
	if aj != "" {
		c.Access = &Access{}
		if err := json.Unmarshal([]byte(aj), c.Access); err != nil {
			return Config{}, err
		}
	}
	c.RemoveAfter = time.Duration(rem)
	if sj != "" {
		if err := json.Unmarshal([]byte(sj), &c.Schema); err != nil {
			return Config{}, err
		}
	}
	cl, err := slackinstall.ParseClearance(c.ClearanceStr)
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

// ProjectionStream names a List projection's audit stream.
func ProjectionStream(tenant domain.TenantID, list string) string {
	return eventstore.KindListProjection.Stream(tenant, list)
}

// audit appends an event to the List projection's stream.
func (s *Store) audit(ctx context.Context, tenant domain.TenantID, list, typ string, payload any) error {
	_, err := slackinstall.AppendEvent(ctx, s.Events, ProjectionStream(tenant, list), eventstore.Any(), tenant, Actor,
		fmt.Sprintf("lists:%s:%s:%s:%d", tenant, list, typ, s.Now().UnixNano()), s.Now(), typ, payload)
	return err
}

// auditOnce appends an event to the List projection's stream under a command id of its own.
func (s *Store) auditOnce(ctx context.Context, tenant domain.TenantID, list, cmdID, typ string, payload any) error {
	_, err := slackinstall.AppendEvent(ctx, s.Events, ProjectionStream(tenant, list), eventstore.Any(), tenant, Actor, cmdID, s.Now(), typ, payload)
	return err
}

func (s *Store) exec(ctx context.Context, q string, args ...any) error {
	_, err := s.DB.ExecContext(ctx, s.DB.Rebind(q), args...)
	return err
}
