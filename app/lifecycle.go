package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/internal/seal"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/privacy"
)

// derivedMaster is the master key derived from the instance secret stored in the database: the
// master when no master key is configured, and otherwise accepted only to unwrap the keys it
// wrapped before one was (casebook keys rotate moves them).
func derivedMaster(secret []byte) ([]byte, error) {
	return seal.Key(secret, "casebook master data key")
}

// wireKeys opens the inquiry key table in the deployment's SQL database (the SQLite file, or
// Postgres, also when events live in KurrentDB) and wraps the event store so that every personal
// field is sealed with its inquiry's data key before it reaches the backend. It refuses to start
// when live data keys are wrapped by a master the configuration lacks (a wrong or missing master
// key file), rather than serve every inquiry as unreadable.
func (a *App) wireKeys(ctx context.Context, secret []byte) error {
	derived, err := derivedMaster(secret)
	if err != nil {
		return err
	}
	masters := append(append([][]byte{}, a.Config.DataKeys...), derived)
	keys, err := sealed.NewKeys(ctx, a.DB, a.Config.Now, masters...)
	if err != nil {
		return err
	}
	if err := keys.Check(ctx); err != nil {
		return fmt.Errorf("%w. Give the master key file that wrapped them (--master-key-file, or --master-key-previous-file "+
			"while rotating with casebook keys rotate)", err)
	}
	if len(a.Config.DataKeys) == 0 {
		a.Config.Logger.Warn("no master key file configured: inquiry data keys are wrapped by a master derived from the instance secret " +
			"stored in the same database, so a copy of the database can read them; set --master-key-file (CASEBOOK_MASTER_KEY_FILE) " +
			"and run casebook keys rotate")
	} else if n, err := keys.WrappedBy(ctx); err == nil && n[sealed.KeyID(derived)] > 0 {
		a.Config.Logger.Warn("inquiry data keys are still wrapped by the instance-derived master; run casebook keys rotate",
			"keys", n[sealed.KeyID(derived)])
	}
	a.Keys = keys
	a.Store = sealed.New(a.Store, keys)
	return nil
}

// RotateReport is what RotateKeys did.
type RotateReport struct {
	Current   string         `json:"current_master"`
	Rewrapped int            `json:"rewrapped"`
	ByMaster  map[string]int `json:"live_keys_by_master"`
	// BlindIndexRebuilt: the requester blind index was rebuilt under the current master, so the
	// previous master files can be dropped.
	BlindIndexRebuilt bool `json:"blind_index_rebuilt"`
}

// RotateKeys wraps every live data key under the current master key (the first of
// Config.DataKeys) and rebuilds the requester blind index under it. Afterwards every previous
// master key, the instance-derived one included, can be dropped from the configuration.
func (a *App) RotateKeys(ctx context.Context) (RotateReport, error) {
	if len(a.Config.DataKeys) == 0 {
		return RotateReport{}, errors.New("keys rotate: no master key configured to rotate to")
	}
	n, err := a.Keys.Rewrap(ctx)
	if err != nil {
		return RotateReport{Rewrapped: n}, err
	}
	rep := RotateReport{Current: a.Keys.Current(), Rewrapped: n}
	if rep.ByMaster, err = a.Keys.WrappedBy(ctx); err != nil {
		return rep, err
	}
	if _, err := projections.Rebuild(ctx, a.Store, a.DB, &privacy.Projection{Index: a.Keys.BlindIndex}, projections.RebuildOptions{
		Logger: a.Config.Logger, Now: a.Config.Now, LeaseTTL: a.Config.LeaseTTL,
	}); err != nil {
		return rep, fmt.Errorf("keys rotate: the data keys are rewrapped, but the blind index was not rebuilt (run casebook replay --projection privacy): %w", err)
	}
	rep.BlindIndexRebuilt = true
	return rep, nil
}

// SealLegacy runs the redaction pass over inquiry events written before sealing (SQLite and
// Postgres; KurrentDB's events are immutable: sealed.ErrImmutable), from the log position from
// ("" for the start).
func (a *App) SealLegacy(ctx context.Context, from string) (sealed.LegacyReport, error) {
	pos := eventstore.Start
	if from != "" {
		p, err := eventstore.ParsePosition(from)
		if err != nil {
			return sealed.LegacyReport{}, err
		}
		pos = p
	}
	s, ok := a.Store.(interface {
		SealLegacy(context.Context, eventstore.Position, func(sealed.LegacyReport)) (sealed.LegacyReport, error)
	})
	if !ok {
		return sealed.LegacyReport{}, errors.New("seal-legacy: the event store is not sealed")
	}
	return s.SealLegacy(ctx, pos, func(r sealed.LegacyReport) {
		a.Config.Logger.Info("seal-legacy progress", "scanned", r.Scanned, "sealed", r.Sealed, "redacted", r.Redacted, "reached", r.Reached)
	})
}

// redactErasedEvents rewrites an erased inquiry's events that still hold personal members in
// clear (sealed.Store.RedactErased); a store that is not sealed has nothing to do.
func (a *App) redactErasedEvents(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) error {
	s, ok := a.Store.(interface {
		RedactErased(context.Context, domain.TenantID, domain.InquiryID) error
	})
	if !ok {
		return nil
	}
	return s.RedactErased(ctx, tenant, id)
}
