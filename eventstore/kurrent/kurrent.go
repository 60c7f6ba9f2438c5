// Package kurrent is the event store on KurrentDB (EventStoreDB), through the gRPC client
// github.com/EventStore/EventStore-Client-Go/v4.
//
// Casebook's log is the part of $all whose stream names start with one of Options.StreamPrefixes;
// system events (stream or event type starting with "$") are never part of it. ReadAll, Subscribe
// and Head see only that part, and Append refuses a stream outside it, whose events no subscriber
// would see. Subscribe filters on the server.
//
// Positions: an eventstore.Position is KurrentDB's $all position, Commit its commit position and
// Prepare its prepare position, so both words order the log as the server does. Start maps to the
// start of $all (no event sits at position 0). ReadAll and Subscribe return events strictly after
// the position given; AppendResult.Position is the position the server reports for the write.
//
// Retries: event ids are the caller's EventData.ID (a UUID), sent as the KurrentDB event ids. An
// append whose outcome is unknown (Unavailable, deadline exceeded, not leader, a connection that
// closed under it) is retried, at most Options.Attempts attempts in all, with the same ids
// and condition. With an Exact or NoStream condition the server answers a batch it already holds
// at that revision with success and writes nothing, so a retried append lands exactly once. With
// Any the server recognises ids only from an in-memory cache of recent writes, so after a leader
// change a retry may write the batch twice. When the attempts run out, or ctx ends, after such a
// failure the outcome is unknown; repeating the append with the same ids is then safe as above.
// KurrentDB does not make ids unique across the log: the same id in a later batch or on another
// stream is written (eventstoretest.Features.IdempotentByPosition).
//
// Reads and subscriptions are retried too. A dropped subscription resubscribes from the last
// event it handled, with backoff, until ctx ends: the handler sees no gap and no event twice.
package kurrent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/casebook/casebook/eventstore"
)

var _ eventstore.Store = (*Store)(nil)

// DefaultStreamPrefixes are the stream categories Casebook writes: every registered kind's.
var DefaultStreamPrefixes = func() []string {
	var out []string
	for _, k := range eventstore.StreamKinds() {
		out = append(out, k.Prefix())
	}
	return out
}()

// Options configure a Store. Zero fields take the defaults named.
type Options struct {
	// StreamPrefixes select Casebook's streams in $all; DefaultStreamPrefixes when empty.
	StreamPrefixes []string
	// Namespace is put before every stream name on the server and taken off on the way back, so
	// several stores can share one cluster. It must not start with "$". Empty by default.
	Namespace string
	// Attempts bounds the attempts of one append or one read page, the first included; 4 when 0.
	Attempts int
	// AttemptTimeout is the deadline of one append attempt or one read page; 10s when 0.
	AttemptTimeout time.Duration
	// RetryBackoff is the first pause before a retry or a resubscription; it doubles up to
	// MaxBackoff. 50ms when 0.
	RetryBackoff time.Duration
	// MaxBackoff caps the pause between retries; 5s when 0.
	MaxBackoff time.Duration
	// PageSize is how many events one read request asks for; 500 when 0.
	PageSize int
	// SubscribeBatch is how many events one Subscribe delivery carries at most; 500 when 0.
	SubscribeBatch int
	// Logger receives the client's and the store's logs; slog.Default() when nil.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if len(o.StreamPrefixes) == 0 {
		o.StreamPrefixes = DefaultStreamPrefixes
	}
	o.StreamPrefixes = append([]string(nil), o.StreamPrefixes...)
	if o.Attempts <= 0 {
		o.Attempts = 4
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 10 * time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.PageSize <= 1 {
		o.PageSize = 500
	}
	if o.SubscribeBatch <= 0 {
		o.SubscribeBatch = 500
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Store is the KurrentDB event store. It is safe for concurrent use.
type Store struct {
	opts Options
	// prefixes are the stream prefixes as the server sees them (namespace included).
	prefixes []string
	// cfg is set when the store opened its client: it may then replace a client that gave up
	// reconnecting, and closes it on Close.
	cfg *esdb.Configuration

	mu     sync.Mutex
	client *esdb.Client
	stuck  map[*esdb.Client]bool // clients with an abandoned call: never closed (see errStuck)
	closed bool
	ops    sync.WaitGroup
	done   context.Context
	stop   context.CancelFunc
}

// Open connects to the cluster named by connString, an esdb:// or esdb+discover:// connection
// string (kurrentdb:// and kurrentdb+discover:// are accepted as the same), and checks that $all
// can be read. The store owns the client and closes it on Close.
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	cfg, err := ParseConnString(connString)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	cfg.Logger = clientLogger(opts.Logger)
	client, err := esdb.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("eventstore/kurrent: %w", err)
	}
	s := newStore(client, opts)
	s.cfg = cfg
	if err := s.probe(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// New returns a store on client, which the caller keeps owning: Close does not close it, and a
// client that gave up reconnecting is not replaced.
func New(client *esdb.Client, opts Options) *Store {
	return newStore(client, opts.withDefaults())
}

func newStore(client *esdb.Client, opts Options) *Store {
	done, stop := context.WithCancel(context.Background())
	prefixes := make([]string, len(opts.StreamPrefixes))
	for i, p := range opts.StreamPrefixes {
		prefixes[i] = opts.Namespace + p
	}
	return &Store{opts: opts, prefixes: prefixes, client: client, stuck: map[*esdb.Client]bool{}, done: done, stop: stop}
}

// ParseConnString parses an esdb:// or kurrentdb:// connection string. Errors do not echo the
// string, which may hold credentials.
func ParseConnString(connString string) (*esdb.Configuration, error) {
	for _, scheme := range []string{"kurrentdb://", "kurrentdb+discover://"} {
		if rest, ok := strings.CutPrefix(connString, scheme); ok {
			connString = strings.Replace(scheme, "kurrentdb", "esdb", 1) + rest
		}
	}
	cfg, err := esdb.ParseConnectionString(connString)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("eventstore/kurrent: connection string: %w", err)
	}
	return cfg, nil
}

// clientLogger sends the client's logs to l, one level lower: the store handles and reports the
// errors the client logs.
func clientLogger(l *slog.Logger) esdb.LoggingFunc {
	return func(level esdb.LogLevel, format string, args ...any) {
		lvl := slog.LevelDebug
		switch level {
		case esdb.LogWarn:
			lvl = slog.LevelInfo
		case esdb.LogError:
			lvl = slog.LevelWarn
		}
		if l.Enabled(context.Background(), lvl) {
			l.Log(context.Background(), lvl, fmt.Sprintf(format, args...), "component", "esdb")
		}
	}
}

// begin registers an operation: its context ends with ctx or when the store closes.
func (s *Store) begin(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, eventstore.ErrClosed
	}
	s.ops.Add(1)
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(s.done, func() { cancel(eventstore.ErrClosed) })
	return ctx, func() {
		unhook()
		cancel(nil)
		s.ops.Done()
	}, nil
}

// ctxErr is the error of an operation whose context ended: ErrClosed if the store closed.
func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, eventstore.ErrClosed) {
		return cause
	}
	return ctx.Err()
}

func (s *Store) currentClient() *esdb.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// replaceClient swaps a client that gave up reconnecting (the esdb client closes itself for
// good when discovery fails) for a new one, if the store opened it. The dead client is not
// closed: its in-flight calls may still report to it.
func (s *Store) replaceClient(dead *esdb.Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg == nil || s.closed {
		return false
	}
	if s.client != dead {
		return true
	}
	c, err := esdb.NewClient(s.cfg)
	if err != nil {
		return false
	}
	s.client = c
	s.opts.Logger.Warn("eventstore/kurrent: replaced a client that stopped reconnecting")
	return true
}

// retryable reports whether a call that failed with err may be repeated: its outcome is unknown
// or it did not reach the leader. ctx is the call's context.
func (s *Store) retryable(ctx context.Context, client *esdb.Client, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, errStuck) {
		return s.replaceClient(client)
	}
	var e *esdb.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() {
	case esdb.ErrorUnavailable, esdb.ErrorCodeDeadlineExceeded, esdb.ErrorCodeNotLeader:
		return true
	case esdb.ErrorCodeConnectionClosed:
		return s.replaceClient(client)
	}
	// The client closed the connection under the call, e.g. to follow a new leader.
	return status.Code(e.Err()) == codes.Canceled
}

// pause waits before attempt n+1 (n ≥ 1), or until ctx ends.
func (s *Store) pause(ctx context.Context, n int) error {
	d := s.opts.RetryBackoff
	for i := 1; i < n && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	t := time.NewTimer(min(d, s.opts.MaxBackoff))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctxErr(ctx)
	case <-t.C:
		return nil
	}
}

// errStuck reports a client call abandoned because it outlived its deadline: the esdb client can
// block for good handing an error to a connection manager that already gave up. Closing that
// client would then panic the blocked call, so the store never closes it.
var errStuck = errors.New("client call did not return after its deadline")

// guard runs call on client and waits for it at most a grace period past the attempt deadline.
func guard[T any](s *Store, client *esdb.Client, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	t := time.NewTimer(s.opts.AttemptTimeout + time.Second)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
		s.mu.Lock()
		s.stuck[client] = true
		s.mu.Unlock()
		var zero T
		return zero, errStuck
	}
}

// retry runs call until it succeeds, fails for good, or Options.Attempts attempts were made.
// call must report through its results only: an abandoned attempt may still be running.
func retry[T any](ctx context.Context, s *Store, what string, call func(*esdb.Client) (T, error)) (T, error) {
	for n := 1; ; n++ {
		client := s.currentClient()
		v, err := guard(s, client, func() (T, error) { return call(client) })
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return v, fmt.Errorf("%w (attempt %d: %w)", ctxErr(ctx), n, err)
		}
		if !s.retryable(ctx, client, err) {
			return v, err
		}
		if n >= s.opts.Attempts {
			return v, fmt.Errorf("gave up after %d attempts: %w", n, err)
		}
		s.opts.Logger.Info("eventstore/kurrent: retrying", "op", what, "attempt", n+1, "err", err)
		if perr := s.pause(ctx, n); perr != nil {
			return v, fmt.Errorf("%w (attempt %d: %w)", perr, n, err)
		}
	}
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// visible reports whether an event of the server's stream with type typ is part of Casebook's log.
func (s *Store) visible(stream, typ string) bool {
	return !strings.HasPrefix(stream, "$") && !strings.HasPrefix(typ, "$") && hasPrefix(stream, s.prefixes)
}

func expectedRevision(e eventstore.ExpectedRevision) esdb.ExpectedRevision {
	if rev, ok := e.Revision(); ok {
		return esdb.Revision(rev)
	}
	if e.IsNoStream() {
		return esdb.NoStream{}
	}
	return esdb.Any{}
}

// Append implements eventstore.Store. Event ids must be UUIDs; see the package comment for the
// retry guarantees. It writes no companion its options carry (see Capabilities): their callers
// write them.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData,
	_ ...eventstore.AppendOption) (eventstore.AppendResult, error) {
	data, err := s.proposed(stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	defer end()
	opts := esdb.AppendToStreamOptions{ExpectedRevision: expectedRevision(expected), Deadline: &s.opts.AttemptTimeout}
	res, err := retry(ctx, s, "append to "+stream, func(c *esdb.Client) (*esdb.WriteResult, error) {
		return c.AppendToStream(ctx, s.opts.Namespace+stream, opts, data...)
	})
	var e *esdb.Error
	if errors.As(err, &e) && e.Code() == esdb.ErrorCodeWrongExpectedVersion {
		return eventstore.AppendResult{}, &eventstore.AppendError{Stream: stream, Expected: expected, Actual: actualRevision(e), Err: eventstore.ErrConcurrency}
	}
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("eventstore/kurrent: append to %s: %w", stream, err)
	}
	out := eventstore.AppendResult{
		NextRevision: res.NextExpectedVersion,
		Position:     eventstore.Position{Commit: res.CommitPosition, Prepare: res.PreparePosition},
	}
	if out.Position == eventstore.Start {
		// The server reported no position: take the last event's.
		evs, err := s.readStream(ctx, stream, out.NextRevision, 1)
		if err == nil && len(evs) != 1 {
			err = fmt.Errorf("revision %d not found", out.NextRevision)
		}
		if err != nil {
			return out, fmt.Errorf("eventstore/kurrent: append to %s landed; reading its position: %w", stream, err)
		}
		out.Position = evs[0].Position
	}
	return out, nil
}

// proposed validates an append and converts its events.
func (s *Store) proposed(stream string, events []eventstore.EventData) ([]esdb.EventData, error) {
	switch {
	case stream == "":
		return nil, errors.New("eventstore/kurrent: empty stream name")
	case !s.visible(s.opts.Namespace+stream, ""):
		return nil, fmt.Errorf("eventstore/kurrent: stream %q is outside the configured prefixes %q", stream, s.opts.StreamPrefixes)
	case len(events) == 0:
		return nil, errors.New("eventstore/kurrent: nothing to append")
	}
	out := make([]esdb.EventData, len(events))
	seen := make(map[uuid.UUID]bool, len(events))
	for i, e := range events {
		id, err := uuid.Parse(e.ID)
		if err != nil || id == uuid.Nil {
			return nil, fmt.Errorf("eventstore/kurrent: event %d: id %q is not a UUID", i, e.ID)
		}
		if seen[id] {
			return nil, fmt.Errorf("eventstore/kurrent: event id %s appears twice in one append", id)
		}
		seen[id] = true
		if e.Type == "" || strings.HasPrefix(e.Type, "$") {
			return nil, fmt.Errorf("eventstore/kurrent: event %d: type %q is empty or a system type", i, e.Type)
		}
		ct := esdb.ContentTypeBinary
		if json.Valid(e.Data) {
			ct = esdb.ContentTypeJson
		}
		out[i] = esdb.EventData{EventID: id, EventType: e.Type, ContentType: ct, Data: e.Data, Metadata: e.Metadata}
	}
	return out, nil
}

// actualRevision reads the current revision from the client's wrong-expected-version message
// ("... but got 'N'"): -1 for no stream, -2 when it cannot tell.
func actualRevision(e *esdb.Error) int64 {
	if e.Err() == nil {
		return -2
	}
	_, got, ok := strings.Cut(e.Err().Error(), "but got '")
	got, _, ok2 := strings.Cut(got, "'")
	if !ok || !ok2 {
		return -2
	}
	if got == "no_stream" {
		return -1
	}
	n, err := strconv.ParseInt(got, 10, 64)
	if err != nil {
		return -2
	}
	return n
}

func (s *Store) recorded(ev *esdb.ResolvedEvent) eventstore.RecordedEvent {
	r := ev.OriginalEvent()
	meta := r.UserMetadata
	if meta == nil {
		meta = []byte{}
	}
	return eventstore.RecordedEvent{
		ID:         r.EventID.String(),
		StreamID:   strings.TrimPrefix(r.StreamID, s.opts.Namespace),
		Revision:   r.EventNumber,
		Position:   eventstore.Position{Commit: r.Position.Commit, Prepare: r.Position.Prepare},
		Type:       r.EventType,
		Data:       r.Data,
		Metadata:   meta,
		RecordedAt: r.CreatedDate,
	}
}

// drain reads rs to its end, calling each for every event; it reports how many events it read.
// notFound is true when the stream does not exist.
func drain(rs *esdb.ReadStream, each func(*esdb.ResolvedEvent)) (n int, notFound bool, err error) {
	defer rs.Close()
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return n, false, nil
		}
		var e *esdb.Error
		if errors.As(err, &e) && e.Code() == esdb.ErrorCodeResourceNotFound {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
		n++
		each(ev)
	}
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventstore.RecordedEvent, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	return s.readStream(ctx, stream, from, limit)
}

func (s *Store) readStream(ctx context.Context, stream string, from uint64, limit int) ([]eventstore.RecordedEvent, error) {
	out := []eventstore.RecordedEvent{}
	for {
		page := s.opts.PageSize
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		at := from // the closure may outlive this iteration (see guard)
		got, err := retry(ctx, s, "read "+stream, func(c *esdb.Client) ([]eventstore.RecordedEvent, error) {
			rs, err := c.ReadStream(ctx, s.opts.Namespace+stream, esdb.ReadStreamOptions{From: esdb.Revision(at), Deadline: &s.opts.AttemptTimeout}, uint64(page))
			if err != nil {
				return nil, err
			}
			var got []eventstore.RecordedEvent
			_, notFound, err := drain(rs, func(ev *esdb.ResolvedEvent) { got = append(got, s.recorded(ev)) })
			if notFound {
				return []eventstore.RecordedEvent{}, err
			}
			return got, err
		})
		if err != nil {
			return nil, fmt.Errorf("eventstore/kurrent: read %s: %w", stream, err)
		}
		out = append(out, got...)
		if len(got) < page || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		from = got[len(got)-1].Revision + 1
	}
}

func allFrom(p eventstore.Position) esdb.AllPosition {
	if p == eventstore.Start {
		return esdb.Start{}
	}
	return esdb.Position{Commit: p.Commit, Prepare: p.Prepare}
}

// ReadAll implements eventstore.Store.
func (s *Store) ReadAll(ctx context.Context, from eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	out := []eventstore.RecordedEvent{}
	after := from // every event at or before after was seen
	for {
		type result struct {
			page []eventstore.RecordedEvent
			next eventstore.Position // last position read
			raw  int                 // events read, skipped ones included
		}
		start := after // the closure may outlive this iteration (see guard)
		r, err := retry(ctx, s, "read $all", func(c *esdb.Client) (result, error) {
			res := result{next: start}
			rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{From: allFrom(start), Deadline: &s.opts.AttemptTimeout}, uint64(s.opts.PageSize))
			if err != nil {
				return res, err
			}
			// A forward read includes the event at its start position: skip what was seen.
			res.raw, _, err = drain(rs, func(ev *esdb.ResolvedEvent) {
				r := ev.OriginalEvent()
				p := eventstore.Position{Commit: r.Position.Commit, Prepare: r.Position.Prepare}
				if !res.next.Less(p) {
					return
				}
				res.next = p
				if s.visible(r.StreamID, r.EventType) {
					res.page = append(res.page, s.recorded(ev))
				}
			})
			return res, err
		})
		if err != nil {
			return nil, fmt.Errorf("eventstore/kurrent: read $all: %w", err)
		}
		raw, next := r.raw, r.next
		for _, e := range r.page {
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
			out = append(out, e)
		}
		if raw < s.opts.PageSize || (limit > 0 && len(out) >= limit) || next == after {
			return out, nil
		}
		after = next
	}
}

// VisibleHead implements eventstore.Store: Head, which waits for no transaction in flight.
func (s *Store) VisibleHead(ctx context.Context) (eventstore.Position, error) { return s.Head(ctx) }

// CommittedHead implements eventstore.Store: Head.
func (s *Store) CommittedHead(ctx context.Context) (eventstore.Position, error) { return s.Head(ctx) }

// Capabilities implements eventstore.Store: a KurrentDB log is counted only by reading it, its
// events are immutable, it keeps no claims, its subscriptions read on their own, and it writes no
// companions.
func (s *Store) Capabilities() eventstore.Capabilities { return eventstore.Capabilities{} }

// CountAfter implements eventstore.Store: unsupported (see Capabilities).
func (s *Store) CountAfter(context.Context, eventstore.Position) (uint64, error) {
	return 0, fmt.Errorf("eventstore/kurrent: count: %w", errors.ErrUnsupported)
}

// RewriteData implements eventstore.Store: unsupported, the events are immutable.
func (s *Store) RewriteData(context.Context, string, uint64, []byte, []byte) (bool, error) {
	return false, fmt.Errorf("eventstore/kurrent: rewrite: the events are immutable: %w", errors.ErrUnsupported)
}

// Claim implements eventstore.Store: the store keeps no claims.
func (s *Store) Claim(string) (eventstore.AppendOption, bool) { return nil, false }

// Claimed implements eventstore.Store: no name is claimed.
func (s *Store) Claimed(context.Context, string) (string, error) { return "", nil }

// SubscribeStats implements eventstore.Store: zeros, the subscriptions share no reads.
func (s *Store) SubscribeStats() eventstore.TailStats { return eventstore.TailStats{} }

// Head implements eventstore.Store: the position of the last event of Casebook's log.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return eventstore.Position{}, err
	}
	defer end()
	var before *eventstore.Position // events at or after it were seen
	for {
		type result struct {
			head, oldest *eventstore.Position
			raw          int
		}
		b := before // the closure may outlive this iteration (see guard)
		r, err := retry(ctx, s, "read $all backwards", func(c *esdb.Client) (result, error) {
			var res result
			var from esdb.AllPosition = esdb.End{}
			if b != nil {
				from = esdb.Position{Commit: b.Commit, Prepare: b.Prepare}
			}
			rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{From: from, Direction: esdb.Backwards, Deadline: &s.opts.AttemptTimeout}, uint64(s.opts.PageSize))
			if err != nil {
				return res, err
			}
			res.raw, _, err = drain(rs, func(ev *esdb.ResolvedEvent) {
				r := ev.OriginalEvent()
				p := eventstore.Position{Commit: r.Position.Commit, Prepare: r.Position.Prepare}
				if b != nil && !p.Less(*b) {
					return
				}
				res.oldest = &p
				if res.head == nil && s.visible(r.StreamID, r.EventType) {
					res.head = &p
				}
			})
			return res, err
		})
		if err != nil {
			return eventstore.Position{}, fmt.Errorf("eventstore/kurrent: head: %w", err)
		}
		if r.head != nil {
			return *r.head, nil
		}
		if r.raw < s.opts.PageSize || r.oldest == nil {
			return eventstore.Start, nil
		}
		before = r.oldest
	}
}

// probe reads one event of $all, to fail Open early on a bad address or missing permissions.
func (s *Store) probe(ctx context.Context) error {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	_, err = retry(ctx, s, "probe", func(c *esdb.Client) (struct{}, error) {
		rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{From: esdb.End{}, Direction: esdb.Backwards, Deadline: &s.opts.AttemptTimeout}, 1)
		if err != nil {
			return struct{}{}, err
		}
		_, _, err = drain(rs, func(*esdb.ResolvedEvent) {})
		return struct{}{}, err
	})
	if err != nil {
		return fmt.Errorf("eventstore/kurrent: reading $all: %w", err)
	}
	return nil
}

// handlerError marks an error returned by a Subscribe handler.
type handlerError struct{ err error }

func (h handlerError) Error() string { return h.err.Error() }

// Subscribe implements eventstore.Store. It subscribes to $all with a server-side filter on the
// stream prefixes and resubscribes after a drop from the last event handled, until ctx ends or
// fn fails; it gives up on errors a retry cannot mend (access denied, unauthenticated).
func (s *Store) Subscribe(ctx context.Context, from eventstore.Position, fn func(context.Context, []eventstore.RecordedEvent) error) error {
	ctx, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	last := from
	failures := 0
	for {
		client := s.currentClient()
		delivered, err := s.follow(ctx, client, &last, fn)
		if h := (handlerError{}); errors.As(err, &h) {
			return h.err
		}
		if ctx.Err() != nil {
			return ctxErr(ctx)
		}
		if !s.resubscribable(ctx, client, err) {
			return fmt.Errorf("eventstore/kurrent: subscription: %w", err)
		}
		if delivered {
			failures = 0
		}
		failures++
		s.opts.Logger.Info("eventstore/kurrent: subscription dropped, resubscribing", "after", last.String(), "err", err)
		if err := s.pause(ctx, failures); err != nil {
			return err
		}
	}
}

// resubscribable reports whether a subscription that ended with err should be restarted.
func (s *Store) resubscribable(ctx context.Context, client *esdb.Client, err error) bool {
	if errors.Is(err, errStuck) {
		return s.replaceClient(client)
	}
	var e *esdb.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case esdb.ErrorCodeAccessDenied, esdb.ErrorCodeUnauthenticated, esdb.ErrorCodeUnsupportedFeature:
			return false
		case esdb.ErrorCodeConnectionClosed:
			return s.replaceClient(client)
		}
		return true
	}
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument, codes.Unimplemented:
		return false
	}
	return ctx.Err() == nil
}

// follow runs one subscription from *last, delivering batches to fn and advancing *last past
// every event handled. It reports whether it delivered anything, and why it stopped.
func (s *Store) follow(ctx context.Context, client *esdb.Client, last *eventstore.Position, fn func(context.Context, []eventstore.RecordedEvent) error) (delivered bool, err error) {
	from := allFrom(*last)
	sub, err := guard(s, client, func() (*esdb.Subscription, error) {
		return client.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{
			From:   from,
			Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: s.prefixes},
		})
	})
	if err != nil {
		return false, err
	}
	items := make(chan *esdb.SubscriptionEvent, s.opts.SubscribeBatch)
	quit := make(chan struct{})
	received := make(chan struct{})
	go func() {
		defer close(received)
		for {
			ev := sub.Recv()
			select {
			case items <- ev:
			case <-quit:
				return
			}
			if ev.SubscriptionDropped != nil {
				return
			}
		}
	}()
	defer func() {
		close(quit)
		_ = sub.Close()
		<-received
	}()
	for {
		var ev *esdb.SubscriptionEvent
		select {
		case ev = <-items:
		case <-ctx.Done():
			return delivered, ctxErr(ctx)
		}
		var batch []eventstore.RecordedEvent
		var dropped error
		next := *last
		for {
			if d := ev.SubscriptionDropped; d != nil {
				dropped = d.Error
				if dropped == nil {
					dropped = errors.New("subscription dropped")
				}
				break
			}
			if a := ev.EventAppeared; a != nil {
				r := a.OriginalEvent()
				p := eventstore.Position{Commit: r.Position.Commit, Prepare: r.Position.Prepare}
				// Never hand over an event at or before one already handled.
				if next.Less(p) {
					next = p
					if s.visible(r.StreamID, r.EventType) {
						batch = append(batch, s.recorded(a))
					}
				}
			}
			if len(batch) >= s.opts.SubscribeBatch {
				break
			}
			var more bool
			select {
			case ev = <-items:
				more = true
			default:
			}
			if !more {
				break
			}
		}
		if len(batch) > 0 {
			if err := fn(ctx, batch); err != nil {
				return delivered, handlerError{err}
			}
			delivered = true
		}
		*last = next
		if dropped != nil {
			return delivered, dropped
		}
	}
}

// Close ends subscriptions and other calls in flight, waits for them, and closes the client if
// the store opened it.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.ops.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg != nil && !s.stuck[s.client] {
		return s.client.Close()
	}
	return nil
}
