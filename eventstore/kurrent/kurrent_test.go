package kurrent_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/eventstore/kurrent"
	"github.com/casebook/casebook/eventstore/kurrent/kurrenttest"
)

// wait bounds every wait for an asynchronous delivery.
const wait = 10 * time.Second

var quiet = slog.New(slog.DiscardHandler)

type testBundle struct {
	store *kurrent.Store
	srv   *kurrenttest.Server
	conn  string
}

// setup starts a fake server and opens a store on it with the test prefix "s-".
func setup(t *testing.T, opts kurrent.Options) testBundle {
	t.Helper()
	conn, srv := kurrenttest.Start(t)
	return testBundle{store: open(t, conn, opts), srv: srv, conn: conn}
}

func open(t *testing.T, conn string, opts kurrent.Options) *kurrent.Store {
	t.Helper()
	if opts.StreamPrefixes == nil {
		opts.StreamPrefixes = []string{"s-"}
	}
	opts.Logger = quiet
	s, err := kurrent.Open(t.Context(), conn, opts)
	if err != nil {
		t.Fatalf("open %s: %v", conn, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	eventstoretest.Exercise(t, func(t *testing.T) eventstore.Store {
		return setup(t, kurrent.Options{SubscribeBatch: 100}).store
	}, eventstoretest.Features{IdempotentByPosition: true, SubscribeBatch: 100})
}

// TestLive runs the conformance suite against the KurrentDB named by KURRENTDB_TEST_URL. Each
// store gets its own namespace, so the server need not be empty.
func TestLive(t *testing.T) {
	url := os.Getenv("KURRENTDB_TEST_URL")
	if url == "" {
		t.Skip("KURRENTDB_TEST_URL is not set: skipping the conformance suite against a real KurrentDB " +
			"(e.g. KURRENTDB_TEST_URL='esdb://127.0.0.1:2113?tls=false')")
	}
	t.Parallel()
	eventstoretest.Exercise(t, func(t *testing.T) eventstore.Store {
		return open(t, url, kurrent.Options{Namespace: "cbtest-" + uuid.NewString()[:8] + "-"})
	}, eventstoretest.Features{IdempotentByPosition: true})
}

func mustAppend(t *testing.T, s eventstore.Store, stream string, exp eventstore.ExpectedRevision, evs []eventstore.EventData) eventstore.AppendResult {
	t.Helper()
	r, err := s.Append(t.Context(), stream, exp, evs)
	if err != nil {
		t.Fatalf("append %s at %s: %v", stream, exp, err)
	}
	return r
}

// assertLog checks that the store holds exactly the events of want, in order, once each.
func assertLog(t *testing.T, s eventstore.Store, want ...eventstore.EventData) []eventstore.RecordedEvent {
	t.Helper()
	all, err := s.ReadAll(t.Context(), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Fatalf("log has %d events, want %d", len(all), len(want))
	}
	for i := range all {
		if all[i].ID != want[i].ID {
			t.Fatalf("event %d is %s, want %s", i, all[i].ID, want[i].ID)
		}
	}
	return all
}

func TestAppendRetriesWhenOutcomeUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault kurrenttest.Fault
		// applied faults write before failing: the retry must be recognised, not written again.
		applied bool
	}{
		{"unavailable", kurrenttest.Unavailable, false},
		{"not leader", kurrenttest.NotLeader, false},
		{"deadline exceeded", kurrenttest.DeadlineExceeded, false},
		{"applied then deadline exceeded", kurrenttest.AppliedDeadlineExceeded, true},
		{"applied then response lost", kurrenttest.AppliedResponseLost, true},
	}
	conditions := []struct {
		name string
		exp  func(existing int) eventstore.ExpectedRevision
	}{
		{"exact", func(n int) eventstore.ExpectedRevision { return eventstore.AfterVersion(uint64(n)) }},
		{"any", func(int) eventstore.ExpectedRevision { return eventstore.Any() }},
	}
	for _, tt := range tests {
		for _, cond := range conditions {
			t.Run(tt.name+"/"+cond.name, func(t *testing.T) {
				t.Parallel()
				// A lost response ends with the attempt's deadline.
				b := setup(t, kurrent.Options{AttemptTimeout: 300 * time.Millisecond, RetryBackoff: time.Millisecond})
				first := eventstoretest.Events("first", 2)
				mustAppend(t, b.store, "s-1", eventstore.NoStream(), first)
				calls := b.srv.Calls(kurrenttest.OpAppend)

				b.srv.InjectFault(kurrenttest.OpAppend, tt.fault)
				batch := eventstoretest.Events("batch", 3)
				r := mustAppend(t, b.store, "s-1", cond.exp(len(first)), batch)

				if got := b.srv.Calls(kurrenttest.OpAppend) - calls; got < 2 {
					t.Errorf("append reached the server %d times, want a retry", got)
				}
				if r.NextRevision != 4 {
					t.Errorf("next revision = %d, want 4", r.NextRevision)
				}
				all := assertLog(t, b.store, append(first, batch...)...)
				if r.Position != all[len(all)-1].Position {
					t.Errorf("append position = %v, want the last event's %v", r.Position, all[len(all)-1].Position)
				}
			})
		}
	}
}

func TestAppendGivesUpAfterAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, kurrent.Options{Attempts: 3, RetryBackoff: time.Millisecond})
	for range 3 {
		b.srv.InjectFault(kurrenttest.OpAppend, kurrenttest.Unavailable)
	}
	_, err := b.store.Append(t.Context(), "s-1", eventstore.NoStream(), eventstoretest.Events("a", 1))
	if err == nil || errors.Is(err, eventstore.ErrConcurrency) || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("err = %v, want giving up after 3 attempts", err)
	}
	// The next append is a fresh start.
	mustAppend(t, b.store, "s-1", eventstore.NoStream(), eventstoretest.Events("a", 1))
	assertLog(t, b.store, eventstoretest.Events("a", 1)...)
}

func TestAppendConflictReportsActualRevision(t *testing.T) {
	t.Parallel()
	b := setup(t, kurrent.Options{})
	mustAppend(t, b.store, "s-1", eventstore.NoStream(), eventstoretest.Events("a", 2))
	tests := []struct {
		stream string
		exp    eventstore.ExpectedRevision
		actual int64
	}{
		{"s-1", eventstore.Exact(0), 1},
		{"s-1", eventstore.NoStream(), 1},
		{"s-2", eventstore.Exact(3), -1},
	}
	for _, tt := range tests {
		_, err := b.store.Append(t.Context(), tt.stream, tt.exp, eventstoretest.Events("x"+tt.exp.String(), 1))
		var ae *eventstore.AppendError
		if !errors.As(err, &ae) || !errors.Is(err, eventstore.ErrConcurrency) || ae.Actual != tt.actual {
			t.Errorf("%s at %s: err = %v, want a conflict with actual %d", tt.stream, tt.exp, err, tt.actual)
		}
	}
}

func TestAppendValidates(t *testing.T) {
	t.Parallel()
	b := setup(t, kurrent.Options{})
	ev := eventstoretest.Events("a", 1)[0]
	tests := []struct {
		name   string
		stream string
		events []eventstore.EventData
	}{
		{"stream outside the prefixes", "other-1", []eventstore.EventData{ev}},
		{"system stream", "$s-1", []eventstore.EventData{ev}},
		{"id not a UUID", "s-1", []eventstore.EventData{{ID: "cmd-1", Type: "T"}}},
		{"id twice in a batch", "s-1", []eventstore.EventData{ev, ev}},
		{"system event type", "s-1", []eventstore.EventData{{ID: ev.ID, Type: "$metadata"}}},
		{"no event type", "s-1", []eventstore.EventData{{ID: ev.ID}}},
	}
	for _, tt := range tests {
		if _, err := b.store.Append(t.Context(), tt.stream, eventstore.Any(), tt.events); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	if b.srv.Len() != 0 {
		t.Fatalf("server holds %d events after refused appends", b.srv.Len())
	}
}

func TestReadsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, kurrent.Options{RetryBackoff: time.Millisecond})
	evs := eventstoretest.Events("a", 3)
	mustAppend(t, b.store, "s-1", eventstore.NoStream(), evs)
	for _, f := range []kurrenttest.Fault{kurrenttest.Unavailable, kurrenttest.NotLeader, kurrenttest.DeadlineExceeded} {
		b.srv.InjectFault(kurrenttest.OpRead, f)
		got, err := b.store.ReadStream(t.Context(), "s-1", 0, 0)
		if err != nil || len(got) != 3 {
			t.Fatalf("read stream after %v: %d events, %v", f, len(got), err)
		}
		b.srv.InjectFault(kurrenttest.OpRead, f)
		assertLog(t, b.store, evs...)
		b.srv.InjectFault(kurrenttest.OpRead, f)
		if h, err := b.store.Head(t.Context()); err != nil || h != got[2].Position {
			t.Fatalf("head after %v = %v, %v; want %v", f, h, err, got[2].Position)
		}
	}
}

// rawClient writes to the fake server around the store, e.g. system events.
func rawClient(t *testing.T, conn string) *esdb.Client {
	t.Helper()
	cfg, err := kurrent.ParseConnString(conn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func rawAppend(t *testing.T, c *esdb.Client, stream, typ string) {
	t.Helper()
	if _, err := c.AppendToStream(t.Context(), stream, esdb.AppendToStreamOptions{},
		esdb.EventData{EventID: uuid.New(), EventType: typ, ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)}); err != nil {
		t.Fatalf("raw append to %s: %v", stream, err)
	}
}

// TestOnlyCasebookStreams checks that ReadAll, Subscribe and Head skip system events and streams
// outside the prefixes, wherever they sit in $all.
func TestOnlyCasebookStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, kurrent.Options{PageSize: 2})
	raw := rawClient(t, b.conn)
	a, c := eventstoretest.Events("a", 2), eventstoretest.Events("c", 1)
	rawAppend(t, raw, "$stats-1", "$statsCollected")
	mustAppend(t, b.store, "s-1", eventstore.NoStream(), a)
	rawAppend(t, raw, "other-1", "OtherEvent")
	rawAppend(t, raw, "s-1", "$metadata-ish")
	rawAppend(t, raw, "$$s-1", "$metadata")
	mustAppend(t, b.store, "s-2", eventstore.NoStream(), c)
	for range 3 {
		rawAppend(t, raw, "other-2", "OtherEvent")
	}
	want := append(append([]eventstore.EventData(nil), a...), c...)
	all := assertLog(t, b.store, want...)
	h, err := b.store.Head(t.Context())
	if err != nil || h != all[len(all)-1].Position {
		t.Fatalf("head = %v, %v; want %v", h, err, all[len(all)-1].Position)
	}
	page, err := b.store.ReadAll(t.Context(), all[0].Position, 1)
	if err != nil || len(page) != 1 || page[0].ID != all[1].ID {
		t.Fatalf("read after the first event: %+v, %v", page, err)
	}
	col := newCollector()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.store.Subscribe(ctx, eventstore.Start, col.handle) }()
	got := col.waitFor(t, len(want))
	assertSame(t, got, all)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscribe returned %v", err)
	}
}

// TestSubscribeResumesAfterDrop drops the subscription while it catches up and again while it
// is live: the handler must see every event once, in order.
func TestSubscribeResumesAfterDrop(t *testing.T) {
	t.Parallel()
	b := setup(t, kurrent.Options{SubscribeBatch: 2, RetryBackoff: time.Millisecond})
	var want []eventstore.EventData
	for i := range 5 {
		evs := eventstoretest.Events(fmt.Sprint("catchup", i), 2)
		mustAppend(t, b.store, fmt.Sprintf("s-%d", i), eventstore.NoStream(), evs)
		want = append(want, evs...)
	}
	// The first subscription fails outright, the next drops after three events.
	b.srv.InjectFault(kurrenttest.OpSubscribe, kurrenttest.Unavailable)
	b.srv.DropSubscriptionAfter(3)
	col := newCollector()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.store.Subscribe(ctx, eventstore.Start, col.handle) }()
	col.waitFor(t, len(want))
	before := b.srv.Subscriptions()
	if before < 2 {
		t.Fatalf("server saw %d subscriptions, want a resubscription", before)
	}

	// Live: drop every subscription, then append.
	b.srv.DropSubscriptions()
	for i := range 3 {
		evs := eventstoretest.Events(fmt.Sprint("live", i), 1)
		mustAppend(t, b.store, "s-live", eventstore.AfterVersion(uint64(i)), evs)
		want = append(want, evs...)
	}
	got := col.waitFor(t, len(want))
	all := assertLog(t, b.store, want...)
	assertSame(t, got, all)
	if b.srv.Subscriptions() <= before {
		t.Fatalf("no resubscription after the live drop")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscribe returned %v", err)
	}
	// Nothing more arrived after the log was read.
	if n := col.len(); n != len(want) {
		t.Fatalf("handler saw %d events, want %d", n, len(want))
	}
}

// TestSurvivesServerOutage stops the server long enough for the client to give up reconnecting:
// appends fail meanwhile, and both appends and a running subscription recover once it is back.
func TestSurvivesServerOutage(t *testing.T) {
	t.Parallel()
	conn, srv := kurrenttest.Start(t)
	// Fail discovery fast so the client gives up within the outage.
	s := open(t, conn+"&maxDiscoverAttempts=1&discoveryInterval=1", kurrent.Options{
		Attempts: 2, RetryBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		// A call stuck in the client (see errStuck) is abandoned after this plus a second.
		AttemptTimeout: time.Second,
	})
	first := eventstoretest.Events("a", 1)
	mustAppend(t, s, "s-1", eventstore.NoStream(), first)
	col := newCollector()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Subscribe(ctx, eventstore.Start, col.handle) }()
	col.waitFor(t, 1)

	srv.Stop()
	if _, err := s.Append(t.Context(), "s-1", eventstore.Exact(0), eventstoretest.Events("b", 1)); err == nil {
		t.Fatal("append succeeded while the server was down")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	second := eventstoretest.Events("b", 1)
	mustAppend(t, s, "s-1", eventstore.Exact(0), second)
	got := col.waitFor(t, 2)
	assertSame(t, got, assertLog(t, s, append(first, second...)...))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscribe returned %v", err)
	}
}

func TestCloseEndsSubscriptions(t *testing.T) {
	t.Parallel()
	b := setup(t, kurrent.Options{})
	mustAppend(t, b.store, "s-1", eventstore.NoStream(), eventstoretest.Events("a", 1))
	col := newCollector()
	done := make(chan error, 1)
	go func() { done <- b.store.Subscribe(t.Context(), eventstore.Start, col.handle) }()
	col.waitFor(t, 1)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, eventstore.ErrClosed) {
			t.Fatalf("subscribe returned %v, want ErrClosed", err)
		}
	case <-time.After(wait):
		t.Fatal("subscription still running after Close")
	}
	if _, err := b.store.Append(t.Context(), "s-1", eventstore.Any(), eventstoretest.Events("b", 1)); !errors.Is(err, eventstore.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	conn, srv := kurrenttest.Start(t)
	addr := srv.Addr()
	tests := []struct {
		name string
		conn string
	}{
		{"esdb", conn},
		{"kurrentdb", "kurrentdb://" + addr + "?tls=false"},
		{"gossip discovery", "esdb+discover://" + addr + "?tls=false"},
		{"kurrentdb gossip discovery", "kurrentdb+discover://" + addr + "?tls=false"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, tt.conn, kurrent.Options{})
			stream := fmt.Sprintf("s-%d", i)
			mustAppend(t, s, stream, eventstore.NoStream(), eventstoretest.Events(stream, 1))
			if got, err := s.ReadStream(t.Context(), stream, 0, 0); err != nil || len(got) != 1 {
				t.Fatalf("read back: %d events, %v", len(got), err)
			}
		})
	}
}

func TestOpenFails(t *testing.T) {
	t.Parallel()
	conn, srv := kurrenttest.Start(t)
	srv.Stop()
	tests := []struct {
		name, conn, notInErr string
	}{
		{"unknown scheme", "postgres://u:hunter2@127.0.0.1:1", "hunter2"},
		{"bad port", "esdb://u:hunter2@127.0.0.1:port?tls=false", "hunter2"},
		{"nobody listening", conn + "&maxDiscoverAttempts=1&discoveryInterval=1", ""},
	}
	for _, tt := range tests {
		s, err := kurrent.Open(t.Context(), tt.conn, kurrent.Options{Logger: quiet, Attempts: 1})
		if err == nil {
			_ = s.Close()
			t.Errorf("%s: opened", tt.name)
			continue
		}
		if tt.notInErr != "" && strings.Contains(err.Error(), tt.notInErr) {
			t.Errorf("%s: error %q shows the password", tt.name, err)
		}
	}
}

// collector gathers subscription deliveries and fails on a duplicate.
type collector struct {
	mu   sync.Mutex
	got  []eventstore.RecordedEvent
	seen map[string]bool
	dup  string
	more chan struct{}
}

func newCollector() *collector {
	return &collector{seen: map[string]bool{}, more: make(chan struct{}, 1)}
}

func (c *collector) handle(_ context.Context, evs []eventstore.RecordedEvent) error {
	c.mu.Lock()
	for _, e := range evs {
		if c.seen[e.ID] && c.dup == "" {
			c.dup = e.ID
		}
		c.seen[e.ID] = true
	}
	c.got = append(c.got, evs...)
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// waitFor blocks until at least n events arrived, failing after the bound or on a duplicate.
func (c *collector) waitFor(t *testing.T, n int) []eventstore.RecordedEvent {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		if c.dup != "" {
			c.mu.Unlock()
			t.Fatalf("event %s delivered twice", c.dup)
		}
		if len(c.got) >= n {
			out := append([]eventstore.RecordedEvent(nil), c.got...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		select {
		case <-c.more:
		case <-deadline.C:
			t.Fatalf("subscription delivered %d events, want %d", c.len(), n)
		}
	}
}

func assertSame(t *testing.T, got, want []eventstore.RecordedEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("delivered %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Position != want[i].Position || got[i].StreamID != want[i].StreamID {
			t.Fatalf("delivery %d = %s@%v, want %s@%v", i, got[i].ID, got[i].Position, want[i].ID, want[i].Position)
		}
	}
}
