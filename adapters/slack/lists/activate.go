package lists

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

// Probe steps, in order.
const (
	StepAccess   = "access"
	StepSchema   = "schema"
	StepCreate   = "create"
	StepUpdate   = "update"
	StepReadBack = "read_back"
	StepDelete   = "delete"
)

// ActivateRequest is what `casebook lists activate` supplies.
type ActivateRequest struct {
	Tenant    domain.TenantID
	List      string
	Team      string // "" projects every team's inquiries
	Clearance string
	// Installation picks one; "" takes the tenant's newest active installation.
	Installation string
	// RemoveAfter is how long a resolved/cancelled inquiry's row stays (default 24 h).
	RemoveAfter time.Duration
}

// ProbeError is a failed activation: the step, the cause and whether the probe row is gone.
type ProbeError struct {
	Step      string
	Err       error
	CleanedUp bool
	LeftRow   string
}

func (e *ProbeError) Error() string {
	s := fmt.Sprintf("activation probe failed at %s: %v", e.Step, e.Err)
	if !e.CleanedUp {
		s += fmt.Sprintf(" (probe row %s left in the List: remove it by hand)", e.LeftRow)
	}
	return s
}

func (e *ProbeError) Unwrap() error { return e.Err }

// Activate runs the reversible probe and only then activates. On any failure the projection stays
// (or becomes) disabled, what the probe created is deleted, and the failure is an event.
func (s *Store) Activate(ctx context.Context, r ActivateRequest) (Config, error) {
	cl, err := slackinstall.ParseClearance(r.Clearance)
	if err != nil {
		return Config{}, err
	}
	if r.List == "" || r.List[0] != 'F' {
		return Config{}, domain.Invalid("list", "must be a List id (F…)")
	}
	if r.RemoveAfter <= 0 {
		r.RemoveAfter = 24 * time.Hour
	}
	if r.Installation == "" {
		if r.Installation, err = s.Install.NewestInstallation(ctx, r.Tenant); err != nil {
			return Config{}, err
		}
	}
	api, _, err := s.Install.ClientFor(ctx, r.Tenant, r.Installation)
	if err != nil {
		return Config{}, err
	}
	// The row exists, disabled, before any Slack call: a crash mid-probe leaves it disabled.
	if err := s.exec(ctx, `INSERT INTO slack_list_projections (tenant_id, list_id, team, installation_id, clearance, remove_after_ns, state, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, list_id) DO UPDATE SET team = excluded.team, installation_id = excluded.installation_id,
		clearance = excluded.clearance, remove_after_ns = excluded.remove_after_ns, state = excluded.state, updated_at = excluded.updated_at`,
		r.Tenant, r.List, r.Team, r.Installation, r.Clearance, int64(r.RemoveAfter), StateDisabled, s.Now().UnixNano()); err != nil {
		return Config{}, err
	}
	sch, perr := s.probe(ctx, api, r.Tenant, r.List, cl)
	if perr != nil {
		ctx := context.WithoutCancel(ctx)
		if err := s.exec(ctx, `UPDATE slack_list_projections SET last_probe_error = ? WHERE tenant_id = ? AND list_id = ?`, perr.Error(), r.Tenant, r.List); err != nil {
			return Config{}, errors.Join(perr, err)
		}
		if err := s.audit(ctx, r.Tenant, r.List, "ListActivationFailed", ListActivationFailed{List: r.List, Step: perr.Step,
			Error: perr.Err.Error(), CleanedUp: perr.CleanedUp, LeftRow: perr.LeftRow}); err != nil {
			return Config{}, errors.Join(perr, err)
		}
		return Config{}, perr
	}
	sj, err := json.Marshal(sch)
	if err != nil {
		return Config{}, err
	}
	if err := s.exec(ctx, `UPDATE slack_list_projections SET state = ?, schema_json = ?, fingerprint = ?, schema_state = ?, schema_reason = '',
		last_probe_error = '', updated_at = ? WHERE tenant_id = ? AND list_id = ?`,
		StateActive, string(sj), sch.Fingerprint, SchemaOK, s.Now().UnixNano(), r.Tenant, r.List); err != nil {
		return Config{}, err
	}
	if err := s.audit(ctx, r.Tenant, r.List, "ListProjectionActivated", ListProjectionActivated{List: r.List, Team: r.Team,
		InstallationID: r.Installation, Clearance: r.Clearance, Schema: sch}); err != nil {
		return Config{}, err
	}
	return s.Config(ctx, r.Tenant, r.List)
}

// readSchema reads the List's columns (items.list with include_list, one row).
func readSchema(ctx context.Context, api *slack.Client, list string) ([]slack.ListColumn, error) {
	res, err := api.GetListItemsContext(ctx, list, slack.GetListItemsOptionLimit(1), slack.GetListItemsOptionIncludeList(true))
	if err != nil {
		return nil, err
	}
	if res.List == nil {
		return nil, errors.New("items.list returned no list metadata")
	}
	return res.List.ListMetadata.Schema, nil
}

// probe checks access, schema, create, update, read-back and delete with a probe row carrying its
// own marker; whatever it created is deleted before it returns an error.
func (s *Store) probe(ctx context.Context, api *slack.Client, tenant domain.TenantID, list string, cl domain.Classification) (Schema, *ProbeError) {
	fail := func(step string, err error) (Schema, *ProbeError) {
		return Schema{}, &ProbeError{Step: step, Err: err, CleanedUp: true}
	}
	if _, err := api.GetListItemsContext(ctx, list, slack.GetListItemsOptionLimit(1)); err != nil {
		return fail(StepAccess, err)
	}
	cols, err := readSchema(ctx, api, list)
	if err != nil {
		return fail(StepSchema, err)
	}
	sch, err := Resolve(cols, cl)
	if err != nil {
		return fail(StepSchema, err)
	}
	nonce := make([]byte, 6)
	_, _ = rand.Read(nonce)
	ref := "probe-" + hex.EncodeToString(nonce)
	marker := s.Markers.For(string(tenant), list, ref, ref)
	v := rowValues{}
	for k, c := range sch.Columns {
		switch {
		case k == ColMarker:
			v[k] = marker
		case c.Options != nil:
			for our := range c.Options {
				if v[k] == "" || our < v[k] {
					v[k] = our // deterministic: the smallest value
				}
			}
		default:
			v[k] = ref
		}
	}
	fs, err := sch.fields(v, false)
	if err != nil {
		return fail(StepCreate, err)
	}
	res, err := api.CreateListItemContext(ctx, list, slack.CreateListItemOptionInitialFields(fs))
	row := ""
	if err != nil {
		if slackeffects.CertainlyNotApplied(err) {
			return fail(StepCreate, err)
		}
		// Unknown result: find the probe row by its marker and remove it.
		found, lerr := findByMarker(context.WithoutCancel(ctx), api, list, sch.Columns[ColMarker].ID, 100, func(m string) bool { return m == marker })
		if lerr != nil {
			return Schema{}, &ProbeError{Step: StepCreate, Err: errors.Join(err, lerr), LeftRow: "unknown (marker " + marker + ")"}
		}
		if found == "" {
			return fail(StepCreate, err)
		}
		return s.cleanup(ctx, api, list, found, StepCreate, err)
	}
	row = res.Item.ID
	// Update: every cell gets another value (selects their largest option, texts a suffix).
	for k, c := range sch.Columns {
		switch {
		case k == ColMarker:
		case c.Options != nil:
			for our := range c.Options {
				if our > v[k] {
					v[k] = our
				}
			}
		default:
			v[k] = ref + "-updated"
		}
	}
	if fs, err = sch.fields(v, true); err != nil {
		return s.cleanup(ctx, api, list, row, StepUpdate, err)
	}
	if err := api.UpdateListItemsContext(ctx, list, cells(row, fs)); err != nil {
		return s.cleanup(ctx, api, list, row, StepUpdate, err)
	}
	info, err := api.GetListItemInfoContext(ctx, list, row)
	if err != nil {
		return s.cleanup(ctx, api, list, row, StepReadBack, err)
	}
	if m := sch.mismatch(info.Record, v); m != "" {
		return s.cleanup(ctx, api, list, row, StepReadBack, errors.New(m))
	}
	if err := api.DeleteListItemContext(ctx, list, row); err != nil {
		return s.cleanup(ctx, api, list, row, StepDelete, err)
	}
	return sch, nil
}

// cleanup deletes the probe row after a failed step; a failed delete names the row left behind.
func (s *Store) cleanup(ctx context.Context, api *slack.Client, list, row, step string, cause error) (Schema, *ProbeError) {
	err := api.DeleteListItemContext(context.WithoutCancel(ctx), list, row)
	if err != nil && !gone(err) {
		return Schema{}, &ProbeError{Step: step, Err: errors.Join(cause, fmt.Errorf("cleanup: %w", err)), LeftRow: row}
	}
	return Schema{}, &ProbeError{Step: step, Err: cause, CleanedUp: true}
}

// Deactivate stops a List projection: no job does Slack I/O for it afterwards. Rows stay.
func (s *Store) Deactivate(ctx context.Context, tenant domain.TenantID, list string) (Config, error) {
	if _, err := s.Config(ctx, tenant, list); err != nil {
		return Config{}, err
	}
	if err := s.exec(ctx, `UPDATE slack_list_projections SET state = ?, updated_at = ? WHERE tenant_id = ? AND list_id = ?`,
		StateDisabled, s.Now().UnixNano(), tenant, list); err != nil {
		return Config{}, err
	}
	if err := s.audit(ctx, tenant, list, "ListProjectionDeactivated", ListProjectionDeactivated{List: list}); err != nil {
		return Config{}, err
	}
	return s.Config(ctx, tenant, list)
}

// CheckSchema re-reads an active List's schema and compares it with the activation's fingerprint.
// Drift fails closed (schema_state drifted, an event); a match sets schema_state ok and touches
// nothing else: activation, cooldown and circuit are separate states.
func (s *Store) CheckSchema(ctx context.Context, tenant domain.TenantID, list string) (Config, error) {
	c, err := s.Config(ctx, tenant, list)
	if err != nil {
		return Config{}, err
	}
	if c.State != StateActive {
		return c, nil // disabled: zero I/O
	}
	api, _, err := s.Install.ClientFor(ctx, tenant, c.InstallationID)
	if err != nil {
		return Config{}, err
	}
	cols, err := readSchema(ctx, api, list)
	if err != nil {
		return Config{}, err
	}
	sch, rerr := Resolve(cols, c.Clearance)
	reason := ""
	switch {
	case rerr != nil:
		reason = rerr.Error()
	case sch.Fingerprint != c.Schema.Fingerprint:
		reason = "fingerprint changed"
	}
	if reason == "" {
		err := s.exec(ctx, `UPDATE slack_list_projections SET schema_state = ?, schema_reason = '' WHERE tenant_id = ? AND list_id = ? AND schema_state <> ?`,
			SchemaOK, tenant, list, SchemaDrifted)
		if err != nil {
			return Config{}, err
		}
		return s.Config(ctx, tenant, list)
	}
	if err := s.exec(ctx, `UPDATE slack_list_projections SET schema_state = ?, schema_reason = ? WHERE tenant_id = ? AND list_id = ?`,
		SchemaDrifted, reason, tenant, list); err != nil {
		return Config{}, err
	}
	if c.SchemaState != SchemaDrifted {
		if err := s.audit(ctx, tenant, list, "ListSchemaDrifted", ListSchemaDrifted{List: list, Expected: c.Schema.Fingerprint,
			Actual: sch.Fingerprint, Reason: reason}); err != nil {
			return Config{}, err
		}
	}
	return s.Config(ctx, tenant, list)
}

// Status is a List projection as operators see it: four separate states.
type Status struct {
	List           string     `json:"list_id"`
	Team           string     `json:"team,omitempty"`
	Clearance      string     `json:"clearance"`
	Activation     string     `json:"activation"`
	LastProbeError string     `json:"last_probe_error,omitempty"`
	Schema         string     `json:"schema"`
	SchemaReason   string     `json:"schema_reason,omitempty"`
	Fingerprint    string     `json:"fingerprint,omitempty"`
	CooldownUntil  *time.Time `json:"cooldown_until,omitempty"`
	CircuitOpen    bool       `json:"circuit_open"`
	CircuitReason  string     `json:"circuit_reason,omitempty"`
	Sync           SyncHealth `json:"sync"`
	// Reconcile is the sweep's watermarks and its last run: outcome counts, coverage, budget use,
	// and the stale and quarantined rows.
	Reconcile     Reconciliation `json:"reconcile"`
	WorkingSetMax int            `json:"working_set_max,omitempty"`
	// Access is what Casebook set on a List it created: name, owner and grants.
	Access *Access `json:"access,omitempty"`
}

// SyncHealth counts a List's rows by their last outcome.
type SyncHealth struct {
	Synced  int `json:"synced"`
	Failing int `json:"failing"`
	// Classes counts failing rows by failure class.
	Classes map[string]int `json:"classes,omitempty"`
}

// Statuses reports a tenant's List projections.
func (s *Store) Statuses(ctx context.Context, tenant domain.TenantID) ([]Status, error) {
	cfgs, err := s.Configs(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := []Status{}
	for _, c := range cfgs {
		st := Status{List: c.List, Team: c.Team, Clearance: c.ClearanceStr, Activation: c.State, LastProbeError: c.LastProbeError,
			Schema: c.SchemaState, SchemaReason: c.SchemaReason, Fingerprint: c.Schema.Fingerprint, Access: c.Access}
		circ, err := s.Effects.Guard.Circuit(ctx, tenant, c.List)
		if err != nil {
			return nil, err
		}
		if circ.CooldownUntil.After(s.Now()) {
			t := circ.CooldownUntil
			st.CooldownUntil = &t
		}
		st.CircuitOpen, st.CircuitReason = circ.Open, circ.Reason
		if st.Sync, err = s.syncHealth(ctx, tenant, c.List); err != nil {
			return nil, err
		}
		if st.Reconcile, err = s.Reconciliation(ctx, tenant, c.List); err != nil {
			return nil, err
		}
		if st.WorkingSetMax, err = s.workingSetMax(ctx, tenant, c.List); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *Store) syncHealth(ctx context.Context, tenant domain.TenantID, list string) (SyncHealth, error) {
	var h SyncHealth
	counts, err := s.Effects.DestinationHealth(ctx, tenant, list, SyncArgs{}.Kind(), RemoveArgs{}.Kind())
	if err != nil {
		return h, err
	}
	for class, n := range counts {
		if class == "" {
			h.Synced += n
			continue
		}
		h.Failing += n
		if h.Classes == nil {
			h.Classes = map[string]int{}
		}
		h.Classes[string(class)] = n
	}
	return h, nil
}
