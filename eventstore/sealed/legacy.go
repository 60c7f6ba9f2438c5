package sealed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// ErrImmutable: the backend's events cannot be rewritten (KurrentDB), so events written before
// sealing cannot be sealed in place.
var ErrImmutable = errors.New("sealed: the event store's events are immutable; sealing events written before sealing needs SQLite or Postgres")

// LegacyReport is what SealLegacy did.
type LegacyReport struct {
	Scanned int `json:"scanned"`
	// Sealed events now hold their personal members sealed under the inquiry's key; Redacted
	// events belonged to an erased inquiry and now hold "[erased]" instead; Changed ones were
	// rewritten by someone else meanwhile and were left alone (a rerun looks at them again).
	Sealed   int `json:"sealed"`
	Redacted int `json:"redacted"`
	Changed  int `json:"changed"`
	// Reached is the position of the last event looked at: --from resumes after it.
	Reached string `json:"reached"`
}

const legacyPage = 500

// SealLegacy is the redaction pass for events written before sealing: every inquiry event with
// personal members and no sealed member, from position from on, is rewritten in place with those
// members sealed under the inquiry's data key (created if it had none), exactly as Append would
// have written it; an erased inquiry's events get "[erased]" in those members instead. It is
// idempotent (sealed events are skipped) and resumable (progress(reached) after every page, and
// a rerun from any earlier position does no harm). The backend must rewrite
// (eventstore.Capabilities.Rewrite).
func (s *Store) SealLegacy(ctx context.Context, from eventstore.Position, progress func(LegacyReport)) (LegacyReport, error) {
	var rep LegacyReport
	if !s.backend.Capabilities().Rewrite {
		return rep, ErrImmutable
	}
	rw := s.backend
	rep.Reached = from.String()
	for {
		recs, err := s.backend.ReadAll(ctx, from, legacyPage)
		if err != nil {
			return rep, err
		}
		if len(recs) == 0 {
			return rep, nil
		}
		for _, r := range recs {
			rep.Scanned++
			if err := s.sealOne(ctx, rw, r, &rep); err != nil {
				return rep, fmt.Errorf("%s revision %d: %w", r.StreamID, r.Revision, err)
			}
			from = r.Position
			rep.Reached = from.String()
		}
		if progress != nil {
			progress(rep)
		}
	}
}

func (s *Store) sealOne(ctx context.Context, rw eventstore.Store, r eventstore.RecordedEvent, rep *LegacyReport) error {
	fields := domain.PersonalFields(r.Type)
	if fields == nil {
		return nil
	}
	tenant, id, ok, err := inquiryOf(r.StreamID, r.Metadata)
	if err != nil || !ok {
		return err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(r.Data, &obj); err != nil {
		return fmt.Errorf("sealed: event data: %w", err)
	}
	if _, sealed := obj[sealedMember]; sealed {
		return nil
	}
	dk, err := s.keys.Ensure(ctx, tenant, id)
	erased := errors.Is(err, ErrErased)
	var data []byte
	switch {
	case erased:
		data, err = Redact(obj, presentOnly(obj, fields))
	case err != nil:
		return err
	default:
		data, err = sealMembers(dk, r.Data, fields, aadOfEvent(r.StreamID, r.Type))
	}
	if err != nil {
		return err
	}
	done, err := rw.RewriteData(ctx, r.StreamID, r.Revision, r.Data, data)
	switch {
	case err != nil:
		return err
	case !done:
		rep.Changed++
	case erased:
		rep.Redacted++
	default:
		rep.Sealed++
	}
	return nil
}

// presentOnly returns the members of fields that obj has.
func presentOnly(obj map[string]json.RawMessage, fields map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for f, v := range fields {
		if _, ok := obj[f]; ok {
			out[f] = v
		}
	}
	return out
}

// RedactErased is the redaction pass for one erased inquiry (an erasure's shredder, after its
// key was destroyed): each event of its stream that holds a personal member in clear (written
// before that member was sealed, beside a sealed member or not) is rewritten in place with
// "[erased]" in it, so the backend holds no plaintext of it either. An inquiry whose key lives is
// left alone; on an immutable backend (KurrentDB) nothing is rewritten, and reads erase those
// members instead. Running it twice is harmless.
func (s *Store) RedactErased(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) error {
	if !s.backend.Capabilities().Rewrite {
		return nil
	}
	rw := s.backend
	if _, err := s.keys.Get(ctx, tenant, id); !errors.Is(err, ErrErased) {
		return err
	}
	stream := eventstore.InquiryStream(tenant, id)
	for from := uint64(0); ; {
		recs, err := s.backend.ReadStream(ctx, stream, from, legacyPage)
		if err != nil {
			return fmt.Errorf("redact %s: %w", stream, err)
		}
		for _, r := range recs {
			if err := redactInPlace(ctx, rw, r); err != nil {
				return fmt.Errorf("redact %s revision %d: %w", stream, r.Revision, err)
			}
			from = r.Revision + 1
		}
		if len(recs) < legacyPage {
			return nil
		}
	}
}

// redactInPlace rewrites r with each personal member it holds in clear reading "[erased]".
func redactInPlace(ctx context.Context, rw eventstore.Store, r eventstore.RecordedEvent) error {
	fields := domain.PersonalFields(r.Type)
	if fields == nil {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(r.Data, &obj); err != nil {
		return fmt.Errorf("sealed: event data: %w", err)
	}
	clear := map[string]json.RawMessage{}
	for f, v := range presentOnly(obj, fields) {
		if !bytes.Equal(obj[f], v) {
			clear[f] = v
		}
	}
	if len(clear) == 0 {
		return nil
	}
	data, err := Redact(obj, clear)
	if err != nil {
		return err
	}
	_, err = rw.RewriteData(ctx, r.StreamID, r.Revision, r.Data, data)
	return err
}
