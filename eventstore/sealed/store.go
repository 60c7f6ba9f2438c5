package sealed

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/flatjson"
)

// sealedMember is the JSON member that holds an event's sealed personal members.
const sealedMember = "sealed"

// Store seals personal members of inquiry events on Append and opens them on every read, so every
// reader (commands, subscribers, rebuilds) sees plain events, and the backend never does; readers
// with no use for personal data read through AsStored instead. An event
// whose data key was destroyed reads with domain.Erased in each personal member. Events written
// before sealing (no "sealed" member) read as they are: see docs/data-lifecycle.md.
//
// Store embeds the backend: every method it does not override (the heads, CountAfter, the claims,
// SubscribeStats, Close) is the backend's own.
type Store struct {
	backend
	keys *Keys
	// asStored: reads return events as the backend holds them (see AsStored).
	asStored bool
	// need, when set, names the events reads open; the others read as stored (see OpeningOnly).
	need func(eventstore.RecordedEvent) bool
}

// backend is the store a Store wraps, embedded under a name of its own so that no caller reaches
// it past Store's methods.
type backend = eventstore.Store

// New wraps inner.
func New(inner eventstore.Store, keys *Keys) eventstore.Store {
	return &Store{backend: inner, keys: keys}
}

var _ eventstore.SealedViews = (*Store)(nil)

// AsStored implements eventstore.SealedViews: the same log, read without opening anything.
// Personal members in clear (events written before sealing, or outside an inquiry stream) are
// left out too, so a reader of this view never holds personal data. Appends are sealed as by s.
func (s *Store) AsStored() eventstore.Store {
	return &Store{backend: s.backend, keys: s.keys, asStored: true}
}

// OpeningOnly implements eventstore.SealedViews: the log as AsStored reads it, except the
// events need names (called with each event as stored), which are opened. Appends are sealed as
// by s.
func (s *Store) OpeningOnly(need func(eventstore.RecordedEvent) bool) eventstore.Store {
	return &Store{backend: s.backend, keys: s.keys, need: need}
}

// RewriteData implements eventstore.Store: unsupported, so that nothing is written to the backend
// unsealed. SealLegacy and RedactErased rewrite through the backend.
func (s *Store) RewriteData(context.Context, string, uint64, []byte, []byte) (bool, error) {
	return false, fmt.Errorf("sealed: rewrite: %w", errors.ErrUnsupported)
}

// Capabilities implements eventstore.Store: the backend's, except that it rewrites nothing
// (RewriteData).
func (s *Store) Capabilities() eventstore.Capabilities {
	c := s.backend.Capabilities()
	c.Rewrite = false
	return c
}

// Keys returns the key table.
func (s *Store) Keys() *Keys { return s.keys }

type metaTenant struct {
	TenantID domain.TenantID `json:"tenant_id"`
}

// inquiryOf names the inquiry an event of stream belongs to; ok is false for other streams.
func inquiryOf(stream string, metadata []byte) (domain.TenantID, domain.InquiryID, bool, error) {
	if !eventstore.KindInquiry.Of(stream) {
		return "", "", false, nil
	}
	tenant, err := tenantOf(metadata)
	if err != nil {
		return "", "", false, fmt.Errorf("sealed: metadata of %s: %w", stream, err)
	}
	id, ok := eventstore.StreamInquiry(eventstore.KindInquiry, stream, tenant)
	if !ok {
		return "", "", false, fmt.Errorf("sealed: stream %s does not belong to tenant %q", stream, tenant)
	}
	return tenant, id, true, nil
}

// tenantOf reads metadata's tenant_id as json.Unmarshal into metaTenant does (the last member
// whose key matches, in any case), decoding nothing else in the common form: tenant_id spelt
// exactly and no other key that encoding/json could read as it (flatjson.MayName). Other forms
// are decoded with json.Unmarshal.
func tenantOf(metadata []byte) (domain.TenantID, error) {
	var buf [16]member
	ms, err := members(metadata, buf[:0])
	if err != nil {
		return "", err
	}
	var found *member
	for i, m := range ms {
		switch {
		case string(m.key) == "tenant_id":
			found = &ms[i]
		case flatjson.MayName(m.key, "tenant_id"):
			return tenantSlow(metadata)
		}
	}
	if found == nil {
		return "", nil
	}
	t, err := stringValue(*found)
	return domain.TenantID(t), err
}

func tenantSlow(metadata []byte) (domain.TenantID, error) {
	var m metaTenant
	err := json.Unmarshal(metadata, &m)
	return m.TenantID, err
}

func aadOfEvent(stream, typ string) []byte { return []byte(stream + "\x00" + typ) }

// Append implements eventstore.Store: it seals the personal members of inquiry events with the
// inquiry's data key (created with the first event that needs one). An erased inquiry accepts no
// event with personal members (ErrErased): nothing personal is ever written in clear.
//
// The first events of an inquiry's stream get a new key that, where the backend runs hooks on the
// key table's database (the embedded store), is stored in the append's own transaction: the key
// commits with the events it seals, in one commit. The backend gets opts, then that key's row.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData,
	opts ...eventstore.AppendOption) (eventstore.AppendResult, error) {
	res, err := s.append(ctx, stream, expected, events, true, opts)
	if errors.Is(err, errKeyTaken) {
		return s.append(ctx, stream, expected, events, false, opts)
	}
	return res, err
}

// append seals and appends; withFresh allows a key stored by the append itself (see Append).
func (s *Store) append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData, withFresh bool,
	opts []eventstore.AppendOption) (eventstore.AppendResult, error) {
	var dk *DataKey
	var stored func() // caches a key stored by the append, once it committed
	out := events
	for i, e := range events {
		fields := domain.PersonalFields(e.Type)
		if fields == nil {
			continue
		}
		tenant, id, ok, err := inquiryOf(stream, e.Metadata)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if !ok {
			continue
		}
		if dk == nil {
			var row eventstore.AppendOption
			if dk, row, stored, err = s.keyFor(ctx, tenant, id, expected, withFresh); err != nil {
				return eventstore.AppendResult{}, err
			}
			if row != nil {
				opts = append(slices.Clip(opts), row)
			}
		}
		data, err := sealMembers(dk, e.Data, fields, aadOfEvent(stream, e.Type))
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if &out[0] == &events[0] {
			out = append([]eventstore.EventData(nil), events...)
		}
		out[i].Data = data
	}
	res, err := s.backend.Append(ctx, stream, expected, out, opts...)
	if err == nil && stored != nil {
		stored()
	}
	return res, err
}

// keyFor returns the data key to seal an append to the inquiry's stream with. For a stream being
// created whose key is not cached, and a backend that writes companions on the key table's
// database, it is a fresh key whose row the returned option makes the append store (stored caches
// it afterwards).
func (s *Store) keyFor(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, expected eventstore.ExpectedRevision,
	withFresh bool) (*DataKey, eventstore.AppendOption, func(), error) {
	if !expected.IsNoStream() {
		dk, err := s.keys.Ensure(ctx, tenant, id)
		return dk, nil, nil, err
	}
	handle := s.keys.db.CompanionHandle()
	if !withFresh || !s.backend.Capabilities().WritesCompanionsOn(handle) {
		dk, err := s.keys.EnsureNew(ctx, tenant, id)
		return dk, nil, nil, err
	}
	if dk := s.keys.fromCache(ident{tenant, id}); dk != nil {
		return dk, nil, nil, nil
	}
	dk, row, err := s.keys.fresh(tenant, id)
	if err != nil {
		return nil, nil, nil, err
	}
	return dk, eventstore.WithCompanions(row.companion(handle)), func() { s.keys.remember(ident{tenant, id}, dk) }, nil
}

// sealMembers moves every member of data that a decoder could read as one of fields (mayName)
// into one sealed member, written last; the other members stay as written, in their order.
func sealMembers(dk *DataKey, data []byte, fields map[string]json.RawMessage, aad []byte) ([]byte, error) {
	if !json.Valid(data) {
		return nil, errors.New("sealed: event data: not valid JSON")
	}
	var buf [16]member
	ms, err := members(data, buf[:0])
	if err != nil {
		return nil, fmt.Errorf("sealed: event data: %w", err)
	}
	for _, m := range ms {
		if !plainKey(m.key) || !plainASCII(m.key) {
			return sealMembersSlow(dk, data, fields, aad)
		}
		if isSealed(m) {
			return nil, errors.New("sealed: event data already has a sealed member")
		}
	}
	personal := func(m member) bool { return mayName(m.key, fields) }
	plain := object(ms, func(m member) bool { return !personal(m) }, nil)
	return object(ms, personal, sealedObject(dk, plain, aad)), nil
}

// sealedObject is {"sealed": the base64 of plain sealed under dk}.
func sealedObject(dk *DataKey, plain, aad []byte) []byte {
	return []byte(`{"` + sealedMember + `":"` + base64.StdEncoding.EncodeToString(dk.Seal(plain, aad)) + `"}`)
}

// sealMembersSlow is sealMembers through a decoded map, for data whose keys are written with
// escapes or outside ASCII.
func sealMembersSlow(dk *DataKey, data []byte, fields map[string]json.RawMessage, aad []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("sealed: event data: %w", err)
	}
	if _, ok := obj[sealedMember]; ok {
		return nil, errors.New("sealed: event data already has a sealed member")
	}
	personal := map[string]json.RawMessage{}
	for k, v := range obj {
		if mayName([]byte(k), fields) {
			personal[k] = v
			delete(obj, k)
		}
	}
	plain, err := json.Marshal(personal)
	if err != nil {
		return nil, err
	}
	ct, err := json.Marshal(base64.StdEncoding.EncodeToString(dk.Seal(plain, aad)))
	if err != nil {
		return nil, err
	}
	obj[sealedMember] = ct
	return json.Marshal(obj)
}

// read returns recs as this store's readers see them: opened, or as stored.
func (s *Store) read(ctx context.Context, recs []eventstore.RecordedEvent) ([]eventstore.RecordedEvent, error) {
	switch {
	case s.asStored:
		return withhold(recs)
	case s.need != nil:
		return s.openSome(ctx, recs)
	}
	return s.open(ctx, recs)
}

// openSome returns recs as withhold does, except those s.need names (judged as stored), which are
// opened from what the backend holds. recs is never changed: readers share it.
func (s *Store) openSome(ctx context.Context, recs []eventstore.RecordedEvent) ([]eventstore.RecordedEvent, error) {
	stored, err := withhold(recs)
	if err != nil {
		return nil, err
	}
	out := stored
	copied := len(recs) > 0 && &stored[0] != &recs[0]
	for i := range stored {
		if !s.need(stored[i]) {
			continue
		}
		opened, err := s.open(ctx, recs[i:i+1])
		if err != nil {
			return nil, err
		}
		if !copied {
			out, copied = slices.Clone(stored), true
		}
		out[i] = opened[0]
	}
	return out, nil
}

// withhold returns recs without any personal member in clear (a copy where any changed); sealed
// members stay as they are.
func withhold(recs []eventstore.RecordedEvent) ([]eventstore.RecordedEvent, error) {
	out := recs
	for i, r := range recs {
		fields := domain.PersonalFields(r.Type)
		if fields == nil {
			continue
		}
		var buf [16]member
		ms, err := members(r.Data, buf[:0])
		if err != nil {
			return nil, fmt.Errorf("%s revision %d: %w", r.StreamID, r.Revision, err)
		}
		personal := func(m member) bool { return mayName(m.key, fields) }
		if !slices.ContainsFunc(ms, personal) {
			continue
		}
		if &out[0] == &recs[0] {
			out = append([]eventstore.RecordedEvent(nil), recs...)
		}
		out[i].Data = object(ms, personal, nil)
	}
	return out, nil
}

// mayName reports whether a decoder could read key (as written) as one of fields
// (flatjson.MayName).
func mayName(key []byte, fields map[string]json.RawMessage) bool {
	for f := range fields {
		if flatjson.MayName(key, f) {
			return true
		}
	}
	return false
}

// object writes the members that skip does not name as one JSON object, followed by the members
// of the JSON object extra (nil: none).
func object(ms []member, skip func(member) bool, extra []byte) []byte {
	n := 2 + len(extra)
	for _, m := range ms {
		n += len(m.raw) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for _, m := range ms {
		if skip(m) {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, m.raw...)
	}
	if extra != nil {
		inner := bytes.TrimSpace(extra)
		inner = bytes.TrimSpace(inner[1 : len(inner)-1])
		if len(inner) > 0 {
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(b, inner...)
		}
	}
	return append(b, '}')
}

// open returns recs with their personal members opened (a copy where any changed). An event
// written before its type's members were sealed (no sealed member, personal members in clear:
// older events, or free-text members sealed since) reads as written while its inquiry's key
// lives, and with those members erased once the key is destroyed.
func (s *Store) open(ctx context.Context, recs []eventstore.RecordedEvent) ([]eventstore.RecordedEvent, error) {
	out := recs
	for i, r := range recs {
		fields := domain.PersonalFields(r.Type)
		if fields == nil {
			continue
		}
		var data []byte
		var err error
		if bytes.Contains(r.Data, []byte(`"`+sealedMember+`"`)) {
			data, err = s.openOne(ctx, r, fields)
		} else {
			data, err = s.openLegacy(ctx, r, fields)
		}
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue
		}
		if &out[0] == &recs[0] {
			out = append([]eventstore.RecordedEvent(nil), recs...)
		}
		out[i].Data = data
	}
	return out, nil
}

// openOne opens r's sealed members; nil when r needs no change.
func (s *Store) openOne(ctx context.Context, r eventstore.RecordedEvent, fields map[string]json.RawMessage) ([]byte, error) {
	tenant, id, ok, err := inquiryOf(r.StreamID, r.Metadata)
	if err != nil || !ok {
		return nil, err
	}
	dk, err := s.keys.Get(ctx, tenant, id)
	if err != nil && !errors.Is(err, ErrErased) {
		return nil, err
	}
	data, found, err := openFound(dk, r.Data, fields, aadOfEvent(r.StreamID, r.Type))
	if err != nil {
		return nil, fmt.Errorf("%s revision %d: %w", r.StreamID, r.Revision, err)
	}
	if !found {
		return s.openLegacy(ctx, r, fields)
	}
	return data, nil
}

// openLegacy returns r, an event without a sealed member, with every personal member it holds in
// clear erased when its inquiry's key was destroyed; nil when r needs no change.
func (s *Store) openLegacy(ctx context.Context, r eventstore.RecordedEvent, fields map[string]json.RawMessage) ([]byte, error) {
	var buf [16]member
	ms, err := members(r.Data, buf[:0])
	if err != nil {
		return nil, fmt.Errorf("%s revision %d: %w", r.StreamID, r.Revision, err)
	}
	if !slices.ContainsFunc(ms, func(m member) bool { return mayName(m.key, fields) }) {
		return nil, nil
	}
	tenant, id, ok, err := inquiryOf(r.StreamID, r.Metadata)
	if err != nil || !ok {
		return nil, err
	}
	if _, err := s.keys.Get(ctx, tenant, id); !errors.Is(err, ErrErased) {
		return nil, err
	}
	data, err := redactClear(r.Data, fields)
	if err != nil {
		return nil, fmt.Errorf("%s revision %d: %w", r.StreamID, r.Revision, err)
	}
	return data, nil
}

// redactClear returns data with each personal member it holds reading as erased.
func redactClear(data []byte, fields map[string]json.RawMessage) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("sealed: event data: %w", err)
	}
	return Redact(obj, presentOnly(obj, fields))
}

// openMembers merges the sealed members back; with no key (destroyed) each reads as erased. The
// result holds the other members as written, then the opened ones.
func openMembers(dk *DataKey, data []byte, fields map[string]json.RawMessage, aad []byte) ([]byte, error) {
	b, _, err := openFound(dk, data, fields, aad)
	return b, err
}

// openFound is openMembers; found is false when data has no sealed member (data is returned as
// it is).
func openFound(dk *DataKey, data []byte, fields map[string]json.RawMessage, aad []byte) ([]byte, bool, error) {
	var buf [16]member
	ms, err := members(data, buf[:0])
	if err != nil {
		return nil, false, fmt.Errorf("sealed: event data: %w", err)
	}
	at := -1
	for i, m := range ms {
		if !plainKey(m.key) {
			return openFoundSlow(dk, data, fields, aad)
		}
		if string(m.key) == sealedMember {
			at = i
		}
	}
	if at < 0 {
		return data, false, nil
	}
	if dk == nil {
		return openFoundSlow(dk, data, fields, aad)
	}
	b64, err := stringValue(ms[at])
	if err != nil {
		return nil, true, fmt.Errorf("sealed: sealed member: %w", err)
	}
	plain, err := openSealed(dk, b64, aad)
	if err != nil {
		return nil, true, err
	}
	if !json.Valid(plain) || plain[0] != '{' {
		return nil, true, errors.New("sealed: sealed members: not a JSON object")
	}
	return object(ms, isSealed, plain), true, nil
}

func isSealed(m member) bool { return string(m.key) == sealedMember }

func openSealed(dk *DataKey, b64 string, aad []byte) ([]byte, error) {
	ct, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("sealed: sealed member: %w", err)
	}
	return dk.Open(ct, aad)
}

// openMembersSlow is openMembers through a decoded map: for an erased inquiry, and for data
// whose keys are written with escapes.
func openMembersSlow(dk *DataKey, data []byte, fields map[string]json.RawMessage, aad []byte) ([]byte, error) {
	b, _, err := openFoundSlow(dk, data, fields, aad)
	return b, err
}

// openFoundSlow is openFound through a decoded map.
func openFoundSlow(dk *DataKey, data []byte, fields map[string]json.RawMessage, aad []byte) ([]byte, bool, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, false, fmt.Errorf("sealed: event data: %w", err)
	}
	raw, ok := obj[sealedMember]
	if !ok {
		return data, false, nil
	}
	delete(obj, sealedMember)
	if dk == nil {
		b, err := Redact(obj, fields)
		return b, true, err
	}
	var b64 string
	if err := json.Unmarshal(raw, &b64); err != nil {
		return nil, true, fmt.Errorf("sealed: sealed member: %w", err)
	}
	plain, err := openSealed(dk, b64, aad)
	if err != nil {
		return nil, true, err
	}
	var personal map[string]json.RawMessage
	if err := json.Unmarshal(plain, &personal); err != nil {
		return nil, true, fmt.Errorf("sealed: sealed members: %w", err)
	}
	for f, v := range personal {
		obj[f] = v
	}
	b, err := json.Marshal(obj)
	return b, true, err
}

// Redact sets every personal member of obj to what it reads once erased and returns its JSON.
func Redact(obj map[string]json.RawMessage, fields map[string]json.RawMessage) ([]byte, error) {
	for f, v := range fields {
		obj[f] = v
	}
	return json.Marshal(obj)
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventstore.RecordedEvent, error) {
	recs, err := s.backend.ReadStream(ctx, stream, from, limit)
	if err != nil {
		return nil, err
	}
	return s.read(ctx, recs)
}

// ReadAll implements eventstore.Store.
func (s *Store) ReadAll(ctx context.Context, from eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	recs, err := s.backend.ReadAll(ctx, from, limit)
	if err != nil {
		return nil, err
	}
	return s.read(ctx, recs)
}

// Subscribe implements eventstore.Store.
func (s *Store) Subscribe(ctx context.Context, from eventstore.Position, fn func(context.Context, []eventstore.RecordedEvent) error) error {
	return s.backend.Subscribe(ctx, from, func(ctx context.Context, recs []eventstore.RecordedEvent) error {
		read, err := s.read(ctx, recs)
		if err != nil {
			return err
		}
		return fn(ctx, read)
	})
}
