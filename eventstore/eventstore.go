// Package eventstore defines the append-only event log every Casebook backend implements, and the
// errors callers branch on. Backends live in sub-packages (sqlite, postgres, kurrent) and all pass
// the shared conformance suite in eventstoretest.
package eventstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
)

// ErrConcurrency is returned by Append when the expected revision does not hold. It is the same
// sentinel as domain.ErrConcurrency so every layer branches on one value.
var ErrConcurrency = domain.ErrConcurrency

// ErrClosed is returned after Close.
var ErrClosed = errors.New("eventstore: closed")

// Position is a place in the global log. Positions are totally ordered by (Commit, Prepare); the zero
// Position is before the first event. Each backend fills both words: SQLite uses its sequence for
// both, Postgres the committing transaction id and the sequence, KurrentDB its commit and prepare
// positions.
type Position struct {
	Commit  uint64 `json:"commit"`
	Prepare uint64 `json:"prepare"`
}

// Start is the position before the first event.
var Start = Position{}

// Less reports whether p is before q.
func (p Position) Less(q Position) bool {
	return p.Commit < q.Commit || (p.Commit == q.Commit && p.Prepare < q.Prepare)
}

// String formats p as "commit.prepare"; ParsePosition reads it back.
func (p Position) String() string {
	return strconv.FormatUint(p.Commit, 10) + "." + strconv.FormatUint(p.Prepare, 10)
}

// ParsePosition parses the form written by Position.String.
func ParsePosition(s string) (Position, error) {
	c, pr, ok := strings.Cut(s, ".")
	if !ok {
		return Position{}, fmt.Errorf("position %q: want commit.prepare", s)
	}
	ci, err1 := strconv.ParseUint(c, 10, 64)
	pi, err2 := strconv.ParseUint(pr, 10, 64)
	if err1 != nil || err2 != nil {
		return Position{}, fmt.Errorf("position %q: want two unsigned integers", s)
	}
	return Position{Commit: ci, Prepare: pi}, nil
}

// ExpectedRevision is the optimistic-concurrency condition of an append. Revisions are zero-based:
// the first event of a stream has revision 0.
type ExpectedRevision struct {
	kind int
	rev  uint64
}

const (
	expectAny = iota
	expectNoStream
	expectExact
)

// Any appends whatever the stream's revision.
func Any() ExpectedRevision { return ExpectedRevision{kind: expectAny} }

// NoStream appends only if the stream has no events.
func NoStream() ExpectedRevision { return ExpectedRevision{kind: expectNoStream} }

// Exact appends only if the stream's last event has revision rev.
func Exact(rev uint64) ExpectedRevision { return ExpectedRevision{kind: expectExact, rev: rev} }

// AfterVersion is the condition for an aggregate that has folded version events: NoStream for 0,
// otherwise Exact(version-1).
func AfterVersion(version uint64) ExpectedRevision {
	if version == 0 {
		return NoStream()
	}
	return Exact(version - 1)
}

// IsAny, IsNoStream and Revision let backends inspect the condition.
func (e ExpectedRevision) IsAny() bool      { return e.kind == expectAny }
func (e ExpectedRevision) IsNoStream() bool { return e.kind == expectNoStream }

// Revision returns the exact revision and true for an Exact condition.
func (e ExpectedRevision) Revision() (uint64, bool) { return e.rev, e.kind == expectExact }

// Check reports whether a stream whose next revision is next (its event count) satisfies e.
func (e ExpectedRevision) Check(next uint64) bool {
	switch e.kind {
	case expectNoStream:
		return next == 0
	case expectExact:
		return next == e.rev+1
	}
	return true
}

func (e ExpectedRevision) String() string {
	switch e.kind {
	case expectNoStream:
		return "no stream"
	case expectExact:
		return "revision " + strconv.FormatUint(e.rev, 10)
	}
	return "any"
}

// EventData is an event to append. ID must be unique across the log and deterministic for a given
// command, so that a retried append can be recognised.
type EventData struct {
	ID       string
	Type     string
	Data     []byte
	Metadata []byte
}

// RecordedEvent is an event as stored.
type RecordedEvent struct {
	ID         string
	StreamID   string
	Revision   uint64
	Position   Position
	Type       string
	Data       []byte
	Metadata   []byte
	RecordedAt time.Time
}

// AppendResult reports where an append landed: the revision of its last event and its position.
type AppendResult struct {
	NextRevision uint64 // revision of the last appended event
	Position     Position
}

// Store is the event log. It is the one deliberately large interface in Casebook: a storage
// boundary implemented by each backend and exercised by eventstoretest. Every method is present on
// every store, so a decorator embeds the store it wraps and overrides only what it changes; what
// differs by backend is declared by Capabilities, and a method a backend lacks fails with an error
// matching errors.ErrUnsupported.
//
// Append is atomic: all events land, contiguously in the stream, or none do, with the companions
// its options carry (AppendOption). A failed condition is an error matching ErrConcurrency (an
// *AppendError). ReadStream returns events of stream with revision ≥ from, in order, at most limit
// (limit ≤ 0 means all); an unknown stream is an empty slice. ReadAll returns events strictly
// after from in global order, at most limit; it never returns an event while an
// earlier-positioned event may still commit. Subscribe calls fn with batches of events after from,
// in global order, until ctx ends (returning ctx.Err()) or fn fails (returning its error); it wakes
// promptly after appends by any process sharing the store. The slice fn gets is its own, but the
// events' Data and Metadata may be shared with the store's other subscriptions (Tail): fn must not
// change them.
type Store interface {
	Append(ctx context.Context, stream string, expected ExpectedRevision, events []EventData, opts ...AppendOption) (AppendResult, error)
	ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]RecordedEvent, error)
	ReadAll(ctx context.Context, from Position, limit int) ([]RecordedEvent, error)
	Subscribe(ctx context.Context, from Position, fn func(context.Context, []RecordedEvent) error) error
	// Head returns the position of the last committed event (Start for an empty log).
	Head(ctx context.Context) (Position, error)
	// VisibleHead returns at once the last event a read would return now. Where Head waits for
	// transactions in flight before the log's end (Postgres: events committed behind the
	// horizon), it does not; elsewhere it is Head. Subscribers use it for their status, which
	// must not wait for other writers' transactions (those are other subscribers' batches, as
	// often as not).
	VisibleHead(ctx context.Context) (Position, error)
	// CommittedHead returns at once the position of the last event committed now, even one still
	// held behind transactions in front of it (Postgres; elsewhere it is Head): every event
	// committed before the call is at or before it, and a subscriber reaches it only once it has
	// applied all of them, so waiting for a subscriber to reach it is waiting for the log as it
	// stands at the call.
	CommittedHead(ctx context.Context) (Position, error)
	// CountAfter counts the events after from from the log's sequence: one index probe (the
	// log's end), never a scan of the events, so subscribers can report their lag in events while
	// millions are behind. The count is never below the number of events after from: it is exact
	// where the sequence skips no number (SQLite: an append that rolls back gives its numbers to
	// the next one, and no event is ever deleted), and over by the numbers skipped where
	// rolled-back appends leave gaps (Postgres). Without Capabilities.Count it fails
	// (errors.ErrUnsupported); eventstoretest's Features.Count says how exact it is.
	CountAfter(ctx context.Context, from Position) (uint64, error)
	// RewriteData replaces one event's data, only while it still is old (compare and swap), and
	// reports whether it did. Only the migration that seals events written before sealing, and
	// an erasure redacting such events of its inquiry, use it; nothing else ever changes a
	// recorded event. Without Capabilities.Rewrite (KurrentDB, whose events are immutable) it
	// fails (errors.ErrUnsupported).
	RewriteData(ctx context.Context, stream string, revision uint64, old, data []byte) (bool, error)
	// Claim returns the option under which an append also claims name for its stream, and true
	// (see ClaimsTable). An append whose name is claimed already stores nothing and fails with
	// ErrClaimed. Without Capabilities.Claims it returns nil and false.
	Claim(name string) (AppendOption, bool)
	// Claimed returns the stream name was claimed for, "" when it is not claimed (always, without
	// Capabilities.Claims).
	Claimed(ctx context.Context, name string) (string, error)
	// SubscribeStats counts the events the store's subscriptions received, read from the backend
	// or shared through a Tail; zeros without Capabilities.SharedReads.
	SubscribeStats() TailStats
	// Capabilities says what the store does where backends differ.
	Capabilities() Capabilities
	Close() error
}

// Capabilities is what a store does where backends differ.
type Capabilities struct {
	// Count: CountAfter counts (SQLite, Postgres).
	Count bool
	// Rewrite: RewriteData rewrites (SQLite, Postgres; not KurrentDB, whose events are immutable).
	Rewrite bool
	// Claims: the store keeps claims (SQLite, Postgres). An intake claims the name derived from
	// its idempotency key for its inquiry's stream, so that the inquiry's id need not be derived
	// from the key and can grow with time (see commands.Handler.Intake).
	Claims bool
	// SharedReads: subscriptions share their reads through a Tail (SQLite, Postgres).
	SharedReads bool
	// CompanionHandle is the database handle whose companions Append writes in its own
	// transaction (see Companion); nil when it writes none.
	CompanionHandle any
}

// WritesCompanionsOn reports whether a store with c writes companions naming handle.
func (c Capabilities) WritesCompanionsOn(handle any) bool {
	return c.CompanionHandle != nil && handle == c.CompanionHandle
}

// SealedViews is implemented by stores that open sealed personal members on every read
// (eventstore/sealed), whose readers may read less:
//
// AsStored returns the same log read as the backend holds it: an event's personal members
// (domain.PersonalFields) are absent and its "sealed" member stays ciphertext; nothing is
// decrypted. A subscriber that reads no personal member uses it: it never holds plaintext
// personal data.
//
// OpeningOnly returns the log as AsStored reads it, except that each event need names, judged on
// its as-stored form, is opened. A subscriber that needs personal members of a few events only
// uses it: nothing else is decrypted for it.
//
// Appends through either are sealed like those through the store itself.
type SealedViews interface {
	AsStored() Store
	OpeningOnly(need func(RecordedEvent) bool) Store
}

// AppendError describes a refused append. It unwraps to its cause (ErrConcurrency for a failed
// condition).
type AppendError struct {
	Stream   string
	Expected ExpectedRevision
	Actual   int64 // last revision found, -1 for no stream, -2 if unknown
	Err      error
}

func (e *AppendError) Error() string {
	return fmt.Sprintf("append to %s at %s (actual %d): %v", e.Stream, e.Expected, e.Actual, e.Err)
}

// Unwrap returns the cause.
func (e *AppendError) Unwrap() error { return e.Err }

// DeterministicID derives a UUID-formatted event id from a command's identity and the event's index,
// so a retried command produces the same ids.
func DeterministicID(commandID string, index int) string {
	sum := sha256.Sum256([]byte(commandID + "\x00" + strconv.Itoa(index)))
	sum[6] = (sum[6] & 0x0f) | 0x80 // version 8: custom
	sum[8] = (sum[8] & 0x3f) | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}

// InquiryStream is the canonical stream name of an inquiry.
func InquiryStream(tenant domain.TenantID, id domain.InquiryID) string {
	return KindInquiry.Stream(tenant, string(id))
}

// StreamInquiry reads the inquiry id from a per-inquiry stream named kind-{tenant}-{id} ("inquiry"
// for InquiryStream). It reports false when the stream is not one of tenant's, or tenant is empty:
// an event whose metadata names another tenant than its stream must not be projected.
func StreamInquiry(kind StreamKind, stream string, tenant domain.TenantID) (domain.InquiryID, bool) {
	rest, ok := strings.CutPrefix(stream, string(kind))
	if ok {
		rest, ok = strings.CutPrefix(rest, "-")
	}
	if ok {
		rest, ok = strings.CutPrefix(rest, string(tenant))
	}
	if ok {
		rest, ok = strings.CutPrefix(rest, "-")
	}
	if !ok || tenant == "" || rest == "" {
		return "", false
	}
	return domain.InquiryID(rest), true
}
