// Package commands turns requests into events: load an inquiry's stream, fold it, let the domain
// decide, and append at the expected revision. It owns idempotency.
//
// Idempotency follows Stripe's semantics, scoped per inquiry stream: the key and a fingerprint of the
// request travel in every appended event's metadata, so the stream itself is the idempotency record
// and a key can never be recorded without its effect (or the reverse). The same key with the same
// request returns the first result and appends nothing; the same key with another request is
// domain.ErrIdempotencyMismatch. Intake derives a name from (tenant, source, key) and its append
// claims it (eventstore.Store.Claim), so a duplicate delivery is caught by the store's own unique
// claim and finds the first inquiry; on a store without claims the name is the inquiry's id, and
// the append's "no stream" condition catches it.
package commands

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// Principals finds a principal inside a tenant (domain.ErrNotFound across tenants).
type Principals interface {
	Principal(ctx context.Context, tenant domain.TenantID, id domain.PrincipalID) (domain.Principal, error)
}

// Handler executes commands. Now and NewID are injected so runs are reproducible.
type Handler struct {
	Store      eventstore.Store
	Principals Principals
	// Secret keys the names intakes claim and their receipts; it must be the same for every
	// replica.
	Secret []byte
	Now    func() time.Time
	NewID  func() string
	// Keys destroys data keys on erasure (nil: erasure is refused).
	Keys Shredder
	// Folds caches folded inquiries between commands (nil: every load folds the whole stream).
	Folds *FoldCache

	// appendOpts go with every append (AppendingWith).
	appendOpts []eventstore.AppendOption
}

// AppendingWith returns a copy of h whose every append carries opts, after those h's appends
// carry: Audited gives it the companion row of a command's audit entry.
func (h *Handler) AppendingWith(opts ...eventstore.AppendOption) Executor {
	c := *h
	c.appendOpts = append(slices.Clip(h.appendOpts), opts...)
	return &c
}

// Result is what a command produced: the inquiry's version after it and the log position to wait for
// for read-your-writes. Replayed is set when an idempotency key matched an earlier command.
type Result struct {
	InquiryID domain.InquiryID    `json:"id"`
	Version   uint64              `json:"version"`
	Position  eventstore.Position `json:"-"`
	Replayed  bool                `json:"-"`
}

// maxRetries bounds reloads after a concurrency conflict for commands without a client version.
const maxRetries = 16

// Intake is a new inquiry from a public form, a portal or an integration.
type Intake struct {
	Tenant         domain.TenantID
	Source         domain.Source
	IdempotencyKey string // empty: a random key, so a retry is a new inquiry
	Requester      domain.Requester
	Subject        string
	Message        string
	Category       string
	CorrelationID  string
	// Submitter is the authenticated principal of a portal or Slack intake; empty for public
	// intake. A portal's idempotency keys are its own (two submitters' equal keys never meet); a
	// Slack intake's key names the message, whoever files it.
	Submitter  *domain.Principal
	ExternalID string
	Priority   domain.Priority
	Team       string
	Permalink  string
	// Files names the attachments submitted with the intake (each file's name and SHA-256, in
	// order). They are part of the idempotency fingerprint: the same key with other files is a
	// validation error, like the same key with another message.
	Files []string
}

// IntakeResult adds the requester's opaque receipt.
type IntakeResult struct {
	Result
	Receipt string
}

// Intake records a new inquiry. It returns only after the InquiryReceived event is durable.
func (h *Handler) Intake(ctx context.Context, c Intake) (IntakeResult, error) {
	c = NormalizeIntake(c)
	auto := c.IdempotencyKey == ""
	if auto {
		c.IdempotencyKey = "auto:" + h.NewID()
	}
	if err := checkKey(c.IdempotencyKey); err != nil {
		return IntakeResult{}, err
	}
	actor := domain.System(c.Tenant, string(c.Source))
	parts := []any{c.Source, c.Requester, c.Subject, c.Message, c.Category}
	var submitter domain.PrincipalID
	if c.Submitter != nil {
		if c.Submitter.TenantID != c.Tenant {
			return IntakeResult{}, fmt.Errorf("intake: %w", domain.ErrNotFound)
		}
		if err := domain.Authorize(*c.Submitter, domain.ActSubmit); err != nil {
			return IntakeResult{}, err
		}
		actor, submitter = *c.Submitter, c.Submitter.ID
		switch c.Source {
		case domain.SourceSlack:
			// The key names the Slack message: whoever files it again, and whatever its text
			// says by then, gets the first inquiry.
			parts = []any{c.Source}
		default:
			// A portal's keys are its own. Public intake's fingerprint is unchanged;
			// authenticated intake's covers its own fields.
			c.IdempotencyKey = SubmitterKey(submitter, c.IdempotencyKey)
			parts = append(parts, submitter, c.ExternalID, c.Priority, c.Team, c.Permalink)
			if len(c.Files) > 0 {
				parts = append(parts, c.Files)
			}
		}
	}
	identity := intakeIdentity(c.Tenant, c.Source, c.IdempotencyKey)
	derived, receipt := h.derive(identity)
	// The inquiry's id grows with time, so each per-inquiry index takes it at its end, unless
	// the store keeps no claims: then a keyed intake's id is the derived one, and the stream's
	// own "no stream" condition catches a redelivery.
	id, claim := derived, ""
	var claimOpt eventstore.AppendOption
	if auto {
		id = h.newInquiryID()
	} else {
		name := eventstore.InquiryStream(c.Tenant, derived)
		if opt, ok := h.Store.Claim(name); ok {
			id, claim, claimOpt = h.newInquiryID(), name, opt
		}
	}
	evs, err := domain.Receive(domain.NewInquiry{
		ID: id, TenantID: c.Tenant, Source: c.Source, Receipt: receipt,
		Requester: c.Requester, Subject: c.Subject, Message: c.Message, Category: c.Category,
		SubmittedBy: submitter, ExternalID: c.ExternalID, Priority: c.Priority, Team: c.Team, Permalink: c.Permalink,
	})
	if err != nil {
		return IntakeResult{}, err
	}
	hash := fingerprint(parts...)
	stream := eventstore.InquiryStream(c.Tenant, id)
	meta := h.meta(actor, "intake:"+identity, c.IdempotencyKey, hash, c.CorrelationID)
	// The events' ids derive from the command and the stream, so a redelivery given another id is
	// caught by the claim, not by its events' ids; a new id leads them, so they grow with time too.
	ids := eventIDs{base: meta.CommandID + "\x00" + stream}
	if id != derived {
		ids.lead = id
	}
	res, err := h.append(ctx, stream, eventstore.NoStream(), evs, meta, ids, claimOpt)
	switch {
	case claim != "" && errors.Is(err, eventstore.ErrClaimed):
		if id, err = h.claimed(ctx, c.Tenant, claim); err != nil {
			return IntakeResult{}, err
		}
		if id == "" {
			return IntakeResult{}, fmt.Errorf("intake: the claim %q was refused but is not there: %w", claim, domain.ErrConcurrency)
		}
		return h.replayIntake(ctx, c.Tenant, id, hash, receipt)
	case errors.Is(err, domain.ErrConcurrency):
		return h.replayIntake(ctx, c.Tenant, id, hash, receipt)
	case err != nil:
		return IntakeResult{}, err
	}
	return IntakeResult{Result: Result{InquiryID: id, Version: 1, Position: res.Position}, Receipt: receipt}, nil
}

// replayIntake answers an intake whose inquiry exists already: the first result when the request
// is the same, domain.ErrIdempotencyMismatch when it is not.
func (h *Handler) replayIntake(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, hash, receipt string) (IntakeResult, error) {
	prior, err := h.Store.ReadStream(ctx, eventstore.InquiryStream(tenant, id), 0, 1)
	if err != nil {
		return IntakeResult{}, err
	}
	if len(prior) == 0 {
		return IntakeResult{}, fmt.Errorf("intake: the new inquiry's stream conflicted but is empty: %w", domain.ErrConcurrency)
	}
	m, err := eventstore.DecodeMetadata(prior[0].Metadata)
	if err != nil {
		return IntakeResult{}, fmt.Errorf("intake: metadata: %w", err)
	}
	if m.RequestHash != hash {
		return IntakeResult{}, domain.ErrIdempotencyMismatch
	}
	return IntakeResult{Result: Result{InquiryID: id, Version: 1, Position: prior[0].Position, Replayed: true}, Receipt: receipt}, nil
}

// claimed returns the inquiry whose intake claimed name, "" when name is not claimed.
func (h *Handler) claimed(ctx context.Context, tenant domain.TenantID, name string) (domain.InquiryID, error) {
	stream, err := h.Store.Claimed(ctx, name)
	if err != nil || stream == "" {
		return "", err
	}
	id, ok := eventstore.StreamInquiry(eventstore.KindInquiry, stream, tenant)
	if !ok {
		return "", fmt.Errorf("intake: claim %q names no inquiry of the tenant: %w", name, domain.ErrNotFound)
	}
	return id, nil
}

// FindIntake returns the inquiry an intake with this tenant, source and idempotency key made, and
// its receipt; domain.ErrNotFound when there is none. The intake claimed its name, or, on a store
// that keeps no claims, its inquiry has the derived id.
func (h *Handler) FindIntake(ctx context.Context, tenant domain.TenantID, source domain.Source, key string) (domain.InquiryID, string, error) {
	derived, receipt := h.IntakeID(tenant, source, key)
	stream := eventstore.InquiryStream(tenant, derived)
	id, err := h.claimed(ctx, tenant, stream)
	if err != nil || id != "" {
		return id, receipt, err
	}
	prior, err := h.Store.ReadStream(ctx, stream, 0, 1)
	if err != nil {
		return "", "", err
	}
	if len(prior) == 0 {
		return "", "", fmt.Errorf("intake: %w", domain.ErrNotFound)
	}
	return derived, receipt, nil
}

// newInquiryID returns a UUIDv7 (RFC 9562 section 5.7): 48 bits of Unix milliseconds, then random
// bits. Inquiries made later sort later, so the indexes keyed by inquiry grow at their ends instead
// of taking each new inquiry on another page. The id reveals when the inquiry was made, which its
// readers see anyway.
func (h *Handler) newInquiryID() domain.InquiryID {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(h.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	return domain.InquiryID(formatUUID(b[:], 7))
}

// SubmitterKey is the idempotency key an authenticated submitter's key is recorded under: keys
// are scoped to their submitter.
func SubmitterKey(submitter domain.PrincipalID, key string) string {
	return "p:" + string(submitter) + ":" + key
}

func intakeIdentity(tenant domain.TenantID, source domain.Source, key string) string {
	return string(tenant) + "\x00" + string(source) + "\x00" + key
}

// IntakeID returns the inquiry id and receipt derived from an intake's tenant, source and
// idempotency key. The receipt is the intake's; the id names its claim (FindIntake finds the
// inquiry), and is the inquiry's own on a store that keeps no claims, so a redelivery lands on
// the same inquiry.
func (h *Handler) IntakeID(tenant domain.TenantID, source domain.Source, key string) (domain.InquiryID, string) {
	return h.derive(intakeIdentity(tenant, source, key))
}

// derive is IntakeID of an intake's identity (intakeIdentity).
func (h *Handler) derive(identity string) (domain.InquiryID, string) {
	return domain.InquiryID(uuidFrom(h.mac("inquiry", identity))),
		"CB-" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h.mac("receipt", identity)[:10])
}

// Target names the inquiry a command applies to, who asks, and under which conditions.
type Target struct {
	Tenant    domain.TenantID
	InquiryID domain.InquiryID
	Actor     domain.Principal
	// IfVersion is the version the client last saw (HTTP If-Match). Nil lets the handler reload and
	// retry after a conflict, for commands that commute.
	IfVersion      *uint64
	IdempotencyKey string
	CorrelationID  string
}

// Transition moves an inquiry along its lifecycle. Priority is accepted only when triaging.
type Transition struct {
	Target
	To       domain.Status
	Reason   string
	Priority domain.Priority
}

// Transition executes c.
func (h *Handler) Transition(ctx context.Context, c Transition) (Result, error) {
	c.Reason = Normalize(c.Reason, false)
	return h.execute(ctx, c.Target, fingerprint("transition", c.To, c.Reason, c.Priority), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.Transition(c.Actor, c.To, c.Reason, c.Priority)
	})
}

// Claim makes the actor the owner.
type Claim struct{ Target }

// Claim executes c.
func (h *Handler) Claim(ctx context.Context, c Claim) (Result, error) {
	return h.execute(ctx, c.Target, fingerprint("claim"), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.Claim(c.Actor)
	})
}

// Assign makes Owner the owner. The owner must be a principal of the same tenant.
type Assign struct {
	Target
	Owner domain.PrincipalID
}

// Assign executes c.
func (h *Handler) Assign(ctx context.Context, c Assign) (Result, error) {
	if c.Owner == "" {
		return Result{}, domain.Invalid("owner", "is required")
	}
	owner, err := h.Principals.Principal(ctx, c.Tenant, c.Owner)
	if errors.Is(err, domain.ErrNotFound) {
		return Result{}, domain.Invalid("owner", "is not a principal of this tenant")
	}
	if err != nil {
		return Result{}, err
	}
	return h.execute(ctx, c.Target, fingerprint("assign", c.Owner), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.Assign(c.Actor, owner)
	})
}

// AddNote appends an operator note. Notes commute, so IfVersion is optional.
type AddNote struct {
	Target
	Body string
}

// AddNote executes c.
func (h *Handler) AddNote(ctx context.Context, c AddNote) (Result, error) {
	c.Body = Normalize(c.Body, true)
	now := h.Now()
	return h.execute(ctx, c.Target, fingerprint("note", c.Body), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.AddNote(c.Actor, c.Body, now)
	})
}

// Cancel moves an inquiry to cancelled; a reason is required.
type Cancel struct {
	Target
	Reason string
}

// Cancel executes c.
func (h *Handler) Cancel(ctx context.Context, c Cancel) (Result, error) {
	return h.Transition(ctx, Transition{Target: c.Target, To: domain.StatusCancelled, Reason: c.Reason})
}

// Load folds an inquiry's stream. An unknown id, or one of another tenant, is domain.ErrNotFound.
func (h *Handler) Load(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*domain.Inquiry, error) {
	q, _, err := h.load(ctx, tenant, id)
	return q, err
}

// loaded carries what a fold learned about idempotency keys.
type loaded struct {
	// byKey holds the keys of the events read by this load; base, from a cached fold, those
	// before them, up to version upTo.
	byKey map[string]keyUse
	base  *keyIndex
	upTo  uint64
	// lastActor changed the inquiry last.
	lastActor domain.PrincipalID
}

// key returns the use of an idempotency key in the stream.
func (l loaded) key(k string) (keyUse, bool) {
	if use, ok := l.byKey[k]; ok {
		return use, true
	}
	return l.base.get(k, l.upTo)
}

type keyUse struct {
	hash     string
	version  uint64
	position eventstore.Position
}

// load folds an inquiry's stream: from a cached fold on when there is one (Folds), reading only
// the events after it.
func (h *Handler) load(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*domain.Inquiry, loaded, error) {
	l := loaded{byKey: map[string]keyUse{}}
	if tenant == "" || id == "" {
		return nil, l, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
	}
	stream := eventstore.InquiryStream(tenant, id)
	q, notes := &domain.Inquiry{}, map[string]uint64{}
	cached := h.Folds.get(stream)
	if cached != nil {
		q, l.base, l.lastActor = cached.q.Clone(), cached.keys, cached.lastActor
		for jobID, rev := range cached.notes {
			notes[jobID] = rev
		}
	}
	recs, err := h.Store.ReadStream(ctx, stream, q.Version, 0)
	if err != nil {
		return nil, l, err
	}
	if len(recs) == 0 && cached == nil {
		return nil, l, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
	}
	for _, r := range recs {
		if r.Revision != q.Version {
			return nil, l, fmt.Errorf("inquiry %s: revision %d read after %d events", id, r.Revision, q.Version)
		}
		d, err := decode(r, tenant, id)
		if err != nil {
			return nil, l, err
		}
		q.Apply(d.event, d.at)
		l.lastActor = d.meta.Actor
		if d.meta.IdempotencyKey != "" {
			l.byKey[d.meta.IdempotencyKey] = keyUse{hash: d.meta.RequestHash, version: q.Version, position: r.Position}
		}
		if f, ok := d.event.(domain.FollowUpScheduled); ok && f.Note != "" {
			notes[f.JobID] = r.Revision
		}
	}
	l.upTo = q.Version
	if cached != nil {
		if err := h.restore(ctx, tenant, id, stream, q, notes); err != nil {
			return nil, l, err
		}
	}
	if cached == nil || len(recs) > 0 {
		h.Folds.put(stream, q, l, l.byKey, notes)
	}
	return q, l, nil
}

// execute is load → decide → append, with idempotency and bounded retries for commands without a
// client version.
func (h *Handler) execute(ctx context.Context, t Target, hash string, decide func(*domain.Inquiry) ([]domain.Event, error)) (Result, error) {
	if t.Actor.TenantID != t.Tenant {
		return Result{}, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
	}
	if err := checkKey(t.IdempotencyKey); err != nil {
		return Result{}, err
	}
	hash = fingerprint(t.Actor.ID, hash)
	for attempt := 0; ; attempt++ {
		q, l, err := h.load(ctx, t.Tenant, t.InquiryID)
		if err != nil {
			return Result{}, err
		}
		if t.IdempotencyKey != "" {
			if use, ok := l.key(t.IdempotencyKey); ok {
				if use.hash != hash {
					return Result{}, domain.ErrIdempotencyMismatch
				}
				return Result{InquiryID: t.InquiryID, Version: use.version, Position: use.position, Replayed: true}, nil
			}
		}
		if t.IfVersion != nil && *t.IfVersion != q.Version {
			return Result{}, &domain.VersionConflictError{Version: q.Version, ChangedBy: l.lastActor}
		}
		evs, err := decide(q)
		if err != nil {
			return Result{}, err
		}
		if len(evs) == 0 {
			return Result{InquiryID: t.InquiryID, Version: q.Version}, nil
		}
		cmdID := h.NewID()
		if t.IdempotencyKey != "" {
			cmdID = fmt.Sprintf("cmd:%s:%s:%d:%s", t.Tenant, t.InquiryID, q.Version, t.IdempotencyKey)
		}
		meta := h.meta(t.Actor, cmdID, t.IdempotencyKey, hash, t.CorrelationID)
		res, err := h.append(ctx, eventstore.InquiryStream(t.Tenant, t.InquiryID), eventstore.AfterVersion(q.Version), evs, meta, eventIDs{base: meta.CommandID})
		if errors.Is(err, domain.ErrConcurrency) && (t.IfVersion == nil || t.IdempotencyKey != "") && attempt < maxRetries {
			// Reload: the winner may have been this very command (same key), or the command may
			// still apply to the newer state.
			continue
		}
		if errors.Is(err, domain.ErrConcurrency) {
			return Result{}, h.conflict(ctx, t)
		}
		if err != nil {
			return Result{}, err
		}
		return Result{InquiryID: t.InquiryID, Version: q.Version + uint64(len(evs)), Position: res.Position}, nil
	}
}

// conflict describes a lost race as the inquiry's current version and who changed it, reloading
// it: the store's error names the stream and is not passed on.
func (h *Handler) conflict(ctx context.Context, t Target) error {
	q, l, err := h.load(ctx, t.Tenant, t.InquiryID)
	if err != nil {
		return err
	}
	return &domain.VersionConflictError{Version: q.Version, ChangedBy: l.lastActor}
}

func (h *Handler) meta(actor domain.Principal, commandID, key, hash, correlation string) domain.Metadata {
	return domain.Metadata{
		TenantID: actor.TenantID, Actor: actor.ID, CommandID: commandID, IdempotencyKey: key,
		RequestHash: hash, CorrelationID: correlation, OccurredAt: h.Now().UTC(), SchemaVersion: domain.SchemaVersion,
	}
}

// eventIDs names the events of an append: each id derives from base and the event's index
// (eventstore.DeterministicID), so a retried command produces the same ids. With a lead (a UUIDv7
// inquiry id), an id takes the lead's time and version, so the log's index of event ids grows at
// its end.
type eventIDs struct {
	base string
	lead domain.InquiryID
}

func (e eventIDs) id(i int) string {
	id := eventstore.DeterministicID(e.base, i)
	if len(e.lead) == len(id) {
		return string(e.lead[:18]) + id[18:]
	}
	return id
}

// append appends evs to stream under meta, with the ids ids names, carrying h's options, then opts.
func (h *Handler) append(ctx context.Context, stream string, exp eventstore.ExpectedRevision, evs []domain.Event, meta domain.Metadata, ids eventIDs,
	opts ...eventstore.AppendOption) (eventstore.AppendResult, error) {
	mb := meta.AppendJSON(nil)
	if mb == nil {
		return eventstore.AppendResult{}, fmt.Errorf("metadata: occurred_at %s cannot be written in RFC 3339", meta.OccurredAt)
	}
	data := make([]eventstore.EventData, len(evs))
	for i, e := range evs {
		typ, b, err := domain.Encode(e)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		data[i] = eventstore.EventData{ID: ids.id(i), Type: typ, Data: b, Metadata: mb}
	}
	return h.Store.Append(ctx, stream, exp, data, append(slices.Clip(h.appendOpts), opts...)...)
}

func (h *Handler) mac(purpose, msg string) []byte {
	m := hmac.New(sha256.New, h.Secret)
	m.Write([]byte(purpose + "\x00" + msg))
	return m.Sum(nil)
}

// MaxKeyLen bounds idempotency keys.
const MaxKeyLen = 255

func checkKey(k string) error {
	if len(k) > MaxKeyLen {
		return domain.Invalid("idempotency_key", "must be at most %d bytes", MaxKeyLen)
	}
	for _, r := range k {
		if r < 0x21 || r > 0x7e {
			return domain.Invalid("idempotency_key", "must be printable ASCII without spaces")
		}
	}
	return nil
}

func uuidFrom(sum []byte) string { return formatUUID(sum[:16], 8) }

// formatUUID formats b's first 16 bytes as a UUID of version (RFC 9562's variant).
func formatUUID(b []byte, version byte) string {
	b = append([]byte(nil), b[:16]...)
	b[6] = (b[6] & 0x0f) | version<<4
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
