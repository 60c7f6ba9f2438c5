// Package eventstoretest is the conformance suite every eventstore backend passes. A behaviour change
// in one backend means extending this suite, not skipping an assertion.
package eventstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/sqldb"
)

// Features declares what a backend can do beyond the common contract.
type Features struct {
	// ConcurrentWriters is how many goroutines the race tests use (SQLite serializes writers but must
	// still be correct under contention).
	ConcurrentWriters int
	// IdempotentByPosition declares a backend whose event ids are an idempotency key checked at
	// the expected revision, not a key unique across the log (KurrentDB): a batch reusing an id
	// from elsewhere in the log is written, and repeating an applied append with the same ids and
	// condition succeeds without writing again. Without it, any reused id is refused.
	IdempotentByPosition bool
	// SubscribeBatch is the most events one Subscribe delivery carries; when set, the suite
	// subscribes to a log of more than two batches (the catching-up path).
	SubscribeBatch int
	// Count is what the backend's CountAfter promises, NoCount when it does not count
	// (eventstore.Capabilities.Count).
	Count Count
	// Claims declares a backend that keeps claims (eventstore.Capabilities.Claims).
	Claims bool
}

// Count is how exactly a backend counts the events after a position (Store.CountAfter).
type Count int

// The kinds of counts.
const (
	NoCount      Count = iota // CountAfter fails with errors.ErrUnsupported
	CountExact                // CountAfter is the number of events after the position
	CountAtLeast              // CountAfter may be over by the sequence numbers rolled-back appends skipped
)

// Factory returns a fresh, empty store. The suite closes it.
type Factory func(t *testing.T) eventstore.Store

// wait bounds how long a test waits for an asynchronous delivery before failing.
const wait = 10 * time.Second

// Exercise runs the whole suite.
func Exercise(t *testing.T, newStore Factory, f Features) {
	if f.ConcurrentWriters == 0 {
		f.ConcurrentWriters = 16
	}
	tests := []struct {
		name string
		fn   func(*testing.T, eventstore.Store, Features)
	}{
		{"AppendExpectedRevision", testAppendExpectedRevision},
		{"AppendIsAtomic", testAppendIsAtomic},
		{"AppendRejectsEmptyAndDuplicateIDs", testAppendRejects},
		{"ReadStream", testReadStream},
		{"ReadAllOrderAndPaging", testReadAll},
		{"ConcurrentAppendsOneWinner", testConcurrentOneWinner},
		{"ConcurrentAppendsManyStreams", testConcurrentManyStreams},
		{"SubscribeCatchUpAndLive", testSubscribe},
		{"SubscribeStopsOnHandlerError", testSubscribeHandlerError},
		{"SubscribeCatchUpOverBatches", testSubscribeOverBatches},
		{"SubscribersShareReads", testSubscribersShareReads},
		{"Head", testHead},
		{"CountAfter", testCountAfter},
		{"Claims", testClaims},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			t.Cleanup(func() { _ = s.Close() })
			tt.fn(t, s, f)
		})
	}
}

// Events builds n events with deterministic ids under prefix.
func Events(prefix string, n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = eventstore.EventData{
			ID:       eventstore.DeterministicID(prefix, i),
			Type:     "TestEvent",
			Data:     fmt.Appendf(nil, `{"n":%d,"p":%q}`, i, prefix),
			Metadata: []byte(`{"tenant_id":"t"}`),
		}
	}
	return out
}

func ctx(t *testing.T) context.Context { return t.Context() }

func mustAppend(t *testing.T, s eventstore.Store, stream string, exp eventstore.ExpectedRevision, evs []eventstore.EventData) eventstore.AppendResult {
	t.Helper()
	r, err := s.Append(ctx(t), stream, exp, evs)
	if err != nil {
		t.Fatalf("append %s at %s: %v", stream, exp, err)
	}
	return r
}

func testAppendExpectedRevision(t *testing.T, s eventstore.Store, _ Features) {
	r := mustAppend(t, s, "s-1", eventstore.NoStream(), Events("a", 2))
	if r.NextRevision != 1 {
		t.Fatalf("next revision = %d, want 1", r.NextRevision)
	}
	conflicts := []struct {
		name string
		exp  eventstore.ExpectedRevision
	}{
		{"no stream on existing", eventstore.NoStream()},
		{"stale exact", eventstore.Exact(0)},
		{"future exact", eventstore.Exact(5)},
	}
	for _, c := range conflicts {
		_, err := s.Append(ctx(t), "s-1", c.exp, Events("x"+c.name, 1))
		if !errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("%s: err = %v, want ErrConcurrency", c.name, err)
		}
		var ae *eventstore.AppendError
		if !errors.As(err, &ae) || ae.Stream != "s-1" {
			t.Errorf("%s: err = %#v, want *AppendError for s-1", c.name, err)
		}
	}
	if _, err := s.Append(ctx(t), "s-missing", eventstore.Exact(0), Events("m", 1)); !errors.Is(err, eventstore.ErrConcurrency) {
		t.Errorf("exact on missing stream: err = %v", err)
	}
	r = mustAppend(t, s, "s-1", eventstore.Exact(1), Events("b", 1))
	if r.NextRevision != 2 {
		t.Fatalf("next revision = %d, want 2", r.NextRevision)
	}
	r = mustAppend(t, s, "s-1", eventstore.Any(), Events("c", 1))
	if r.NextRevision != 3 {
		t.Fatalf("any: next revision = %d, want 3", r.NextRevision)
	}
	r = mustAppend(t, s, "s-new", eventstore.Any(), Events("d", 1))
	if r.NextRevision != 0 {
		t.Fatalf("any on new stream: next revision = %d, want 0", r.NextRevision)
	}
}

func testAppendIsAtomic(t *testing.T, s eventstore.Store, f Features) {
	mustAppend(t, s, "s-1", eventstore.NoStream(), Events("a", 1))
	// A batch that starts with the stream's first event and goes on with new ones is refused whole.
	partial := append(Events("a", 1), Events("p", 2)...)
	if _, err := s.Append(ctx(t), "s-1", eventstore.NoStream(), partial); err == nil {
		t.Fatal("batch partly repeating the stream was accepted")
	}
	// The next batch reuses an id of the first: the whole batch must be refused, or, where ids
	// are not unique across the log, land whole.
	want := 1
	bad := append(Events("b", 2), Events("a", 1)...)
	_, err := s.Append(ctx(t), "s-1", eventstore.Exact(0), bad)
	switch {
	case f.IdempotentByPosition:
		if err != nil {
			t.Fatalf("batch reusing an id from another append: %v", err)
		}
		want = 4
	case err == nil:
		t.Fatal("batch with a duplicate event id was accepted")
	}
	got, err := s.ReadStream(ctx(t), "s-1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want {
		t.Fatalf("stream has %d events, want %d", len(got), want)
	}
	all, err := s.ReadAll(ctx(t), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != want {
		t.Fatalf("log has %d events, want %d", len(all), want)
	}
}

func testAppendRejects(t *testing.T, s eventstore.Store, f Features) {
	if _, err := s.Append(ctx(t), "s-1", eventstore.Any(), nil); err == nil {
		t.Error("empty append accepted")
	}
	if _, err := s.Append(ctx(t), "", eventstore.Any(), Events("a", 1)); err == nil {
		t.Error("append to empty stream name accepted")
	}
	first := mustAppend(t, s, "s-1", eventstore.NoStream(), Events("a", 1))
	_, err := s.Append(ctx(t), "s-2", eventstore.NoStream(), Events("a", 1))
	if !f.IdempotentByPosition {
		// The same event id on another stream is refused: ids are unique across the log.
		if err == nil {
			t.Error("duplicate event id on another stream accepted")
		}
		return
	}
	if err != nil {
		t.Errorf("event id reused on another stream: %v", err)
	}
	// Repeating the applied append is a success that writes nothing.
	again, err := s.Append(ctx(t), "s-1", eventstore.NoStream(), Events("a", 1))
	if err != nil || again.NextRevision != first.NextRevision {
		t.Fatalf("repeated append = %+v, %v; want revision %d", again, err, first.NextRevision)
	}
	if got, err := s.ReadStream(ctx(t), "s-1", 0, 0); err != nil || len(got) != 1 {
		t.Fatalf("stream has %d events (%v) after a repeated append, want 1", len(got), err)
	}
}

func testReadStream(t *testing.T, s eventstore.Store, _ Features) {
	want := Events("a", 5)
	mustAppend(t, s, "s-1", eventstore.NoStream(), want[:3])
	mustAppend(t, s, "s-2", eventstore.NoStream(), Events("other", 2))
	mustAppend(t, s, "s-1", eventstore.Exact(2), want[3:])
	got, err := s.ReadStream(ctx(t), "s-1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("read %d events, want 5", len(got))
	}
	for i, e := range got {
		if e.Revision != uint64(i) || e.StreamID != "s-1" || e.ID != want[i].ID || e.Type != want[i].Type ||
			!bytes.Equal(e.Data, want[i].Data) || !bytes.Equal(e.Metadata, want[i].Metadata) {
			t.Errorf("event %d = %+v, want %+v", i, e, want[i])
		}
		if e.RecordedAt.IsZero() {
			t.Errorf("event %d has no recorded time", i)
		}
		if i > 0 && !got[i-1].Position.Less(e.Position) {
			t.Errorf("positions not increasing at %d: %v then %v", i, got[i-1].Position, e.Position)
		}
	}
	got, err = s.ReadStream(ctx(t), "s-1", 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Revision != 2 || got[1].Revision != 3 {
		t.Fatalf("from 2 limit 2: %+v", got)
	}
	got, err = s.ReadStream(ctx(t), "nope", 0, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("unknown stream: %v %v", got, err)
	}
}

func testReadAll(t *testing.T, s eventstore.Store, _ Features) {
	for i := range 5 {
		mustAppend(t, s, fmt.Sprintf("s-%d", i), eventstore.NoStream(), Events(fmt.Sprint("e", i), 3))
	}
	all, err := s.ReadAll(ctx(t), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 15 {
		t.Fatalf("read %d events, want 15", len(all))
	}
	for i := 1; i < len(all); i++ {
		if !all[i-1].Position.Less(all[i].Position) {
			t.Fatalf("global order broken at %d: %v then %v", i, all[i-1].Position, all[i].Position)
		}
	}
	// Paging strictly after the last position seen visits every event exactly once.
	var paged []eventstore.RecordedEvent
	pos := eventstore.Start
	for {
		page, err := s.ReadAll(ctx(t), pos, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 4 {
			t.Fatalf("page of %d > limit 4", len(page))
		}
		paged = append(paged, page...)
		pos = page[len(page)-1].Position
	}
	if len(paged) != len(all) {
		t.Fatalf("paging saw %d events, want %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i].ID != all[i].ID {
			t.Fatalf("paging order differs at %d", i)
		}
	}
}

func testConcurrentOneWinner(t *testing.T, s eventstore.Store, f Features) {
	mustAppend(t, s, "s-1", eventstore.NoStream(), Events("a", 1))
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range f.ConcurrentWriters {
		wg.Go(func() {
			_, err := s.Append(ctx(t), "s-1", eventstore.Exact(0), Events(fmt.Sprint("w", i), 1))
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, eventstore.ErrConcurrency):
				conflicts.Add(1)
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || int(conflicts.Load()) != f.ConcurrentWriters-1 {
		t.Fatalf("wins = %d, conflicts = %d; want 1 and %d", wins.Load(), conflicts.Load(), f.ConcurrentWriters-1)
	}
	got, err := s.ReadStream(ctx(t), "s-1", 0, 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("stream has %d events (%v), want 2", len(got), err)
	}
}

func testConcurrentManyStreams(t *testing.T, s eventstore.Store, f Features) {
	const perWriter = 10
	var wg sync.WaitGroup
	for w := range f.ConcurrentWriters {
		wg.Go(func() {
			for i := range perWriter {
				stream := fmt.Sprintf("s-%d-%d", w, i)
				if _, err := s.Append(ctx(t), stream, eventstore.NoStream(), Events(stream, 2)); err != nil {
					t.Errorf("%s: %v", stream, err)
				}
			}
		})
	}
	wg.Wait()
	all, err := s.ReadAll(ctx(t), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.ConcurrentWriters * perWriter * 2; len(all) != want {
		t.Fatalf("log has %d events, want %d", len(all), want)
	}
	seen := map[string]bool{}
	for i, e := range all {
		if seen[e.ID] {
			t.Fatalf("event %s read twice", e.ID)
		}
		seen[e.ID] = true
		if i > 0 && !all[i-1].Position.Less(e.Position) {
			t.Fatalf("global order broken at %d", i)
		}
	}
}

// collector gathers subscription deliveries.
type collector struct {
	mu   sync.Mutex
	got  []eventstore.RecordedEvent
	more chan struct{}
}

func newCollector() *collector { return &collector{more: make(chan struct{}, 1)} }

func (c *collector) handle(_ context.Context, evs []eventstore.RecordedEvent) error {
	c.mu.Lock()
	c.got = append(c.got, evs...)
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
	return nil
}

// waitFor blocks until at least n events arrived, failing after the suite's bound.
func (c *collector) waitFor(t *testing.T, n int) []eventstore.RecordedEvent {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		if len(c.got) >= n {
			out := append([]eventstore.RecordedEvent(nil), c.got...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		select {
		case <-c.more:
		case <-deadline.C:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("subscription delivered %d events, want %d", len(c.got), n)
		}
	}
}

func testSubscribe(t *testing.T, s eventstore.Store, _ Features) {
	mustAppend(t, s, "s-1", eventstore.NoStream(), Events("a", 3))
	c := newCollector()
	sctx, cancel := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	go func() { done <- s.Subscribe(sctx, eventstore.Start, c.handle) }()
	c.waitFor(t, 3)
	mustAppend(t, s, "s-2", eventstore.NoStream(), Events("b", 2))
	mustAppend(t, s, "s-1", eventstore.Exact(2), Events("c", 1))
	got := c.waitFor(t, 6)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscribe returned %v, want context.Canceled", err)
	}
	all, err := s.ReadAll(ctx(t), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Fatalf("subscription saw %d events, log has %d", len(got), len(all))
	}
	for i := range all {
		if got[i].ID != all[i].ID || got[i].Position != all[i].Position {
			t.Fatalf("delivery %d = %s@%v, want %s@%v", i, got[i].ID, got[i].Position, all[i].ID, all[i].Position)
		}
	}
	// Resuming from a position delivers only what follows it.
	c2 := newCollector()
	sctx2, cancel2 := context.WithCancel(ctx(t))
	defer cancel2()
	go func() { done <- s.Subscribe(sctx2, all[2].Position, c2.handle) }()
	got2 := c2.waitFor(t, 3)
	if len(got2) != 3 || got2[0].ID != all[3].ID {
		t.Fatalf("resume delivered %d events starting %s, want 3 starting %s", len(got2), got2[0].ID, all[3].ID)
	}
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("resumed subscribe returned %v, want context.Canceled", err)
	}
}

// testSubscribeOverBatches: a subscriber behind by more than two batches gets every event once,
// in log order, including those appended while it applies a batch (a backend may read its next
// batch meanwhile); a handler error ends the subscription with that error.
func testSubscribeOverBatches(t *testing.T, s eventstore.Store, f Features) {
	if f.SubscribeBatch == 0 {
		t.Skip("the backend declares no Subscribe batch size")
	}
	const chunk = 500
	total := 2*f.SubscribeBatch + 7
	for i := 0; i < total; i += chunk {
		mustAppend(t, s, fmt.Sprint("s-", i), eventstore.NoStream(), Events(fmt.Sprint("e", i), min(chunk, total-i)))
	}
	want := total + 3
	var got []eventstore.RecordedEvent
	batches, reached, done := 0, make(chan struct{}), make(chan error, 1)
	sctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	go func() {
		done <- s.Subscribe(sctx, eventstore.Start, func(_ context.Context, evs []eventstore.RecordedEvent) error {
			if batches++; batches == 1 {
				if _, err := s.Append(sctx, "s-live", eventstore.NoStream(), Events("live", 3)); err != nil {
					return err
				}
			}
			got = append(got, evs...)
			if len(got) >= want && len(got)-len(evs) < want {
				close(reached)
			}
			return nil
		})
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("subscription ended early: %v", err)
	case <-time.After(6 * wait):
		cancel()
		err := <-done
		t.Fatalf("delivered %d of %d events (the subscription then returned %v)", len(got), want, err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscribe returned %v, want context.Canceled", err)
	}
	all, err := s.ReadAll(ctx(t), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != want || len(got) != want {
		t.Fatalf("log has %d events, subscription saw %d, want %d", len(all), len(got), want)
	}
	for i := range all {
		if got[i].ID != all[i].ID || got[i].Position != all[i].Position {
			t.Fatalf("delivery %d = %s@%v, want %s@%v", i, got[i].ID, got[i].Position, all[i].ID, all[i].Position)
		}
	}
	boom := errors.New("boom")
	if err := s.Subscribe(ctx(t), eventstore.Start, func(context.Context, []eventstore.RecordedEvent) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("subscribe returned %v, want the handler's error", err)
	}
}

// testSubscribersShareReads: subscriptions of one store following the same log each get every
// event once, in log order, while a store that shares its reads (Capabilities.SharedReads) reads
// most events from the backend once for all of them.
func testSubscribersShareReads(t *testing.T, s eventstore.Store, _ Features) {
	if !s.Capabilities().SharedReads {
		t.Skip("the backend does not share reads between subscriptions")
	}
	const subs, streams, per, live = 8, 10, 100, 20
	for i := range streams {
		mustAppend(t, s, fmt.Sprint("s-", i), eventstore.NoStream(), Events(fmt.Sprint("e", i), per))
	}
	sctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	cs := make([]*collector, subs)
	var wg sync.WaitGroup
	for i := range cs {
		cs[i] = newCollector()
		wg.Go(func() { _ = s.Subscribe(sctx, eventstore.Start, cs[i].handle) })
	}
	for _, c := range cs {
		c.waitFor(t, streams*per)
	}
	// Every delivered event was read from the backend or shared; without sharing, each
	// subscription would have read all of them (subs*streams*per from the backend).
	st := s.SubscribeStats()
	if st.Backend+st.Shared != subs*streams*per || st.Backend > 2*streams*per {
		t.Errorf("catching up, %d subscriptions read %d events from the backend and %d shared, want %d in all, at most %d from the backend",
			subs, st.Backend, st.Shared, subs*streams*per, 2*streams*per)
	}
	for i := range live {
		mustAppend(t, s, fmt.Sprint("live-", i), eventstore.NoStream(), Events(fmt.Sprint("l", i), 1))
	}
	all, err := s.ReadAll(ctx(t), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		got := c.waitFor(t, len(all))
		if len(got) != len(all) {
			t.Fatalf("subscription %d saw %d events, the log has %d", i, len(got), len(all))
		}
		for j := range all {
			if got[j].ID != all[j].ID || got[j].Position != all[j].Position || !bytes.Equal(got[j].Data, all[j].Data) {
				t.Fatalf("subscription %d: delivery %d = %s@%v, want %s@%v", i, j, got[j].ID, got[j].Position, all[j].ID, all[j].Position)
			}
		}
	}
	cancel()
	wg.Wait()
}

func testSubscribeHandlerError(t *testing.T, s eventstore.Store, _ Features) {
	mustAppend(t, s, "s-1", eventstore.NoStream(), Events("a", 1))
	boom := errors.New("boom")
	err := s.Subscribe(ctx(t), eventstore.Start, func(context.Context, []eventstore.RecordedEvent) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("subscribe returned %v, want the handler's error", err)
	}
}

func testHead(t *testing.T, s eventstore.Store, _ Features) {
	h, err := s.Head(ctx(t))
	if err != nil || h != eventstore.Start {
		t.Fatalf("empty head = %v, %v", h, err)
	}
	mustAppend(t, s, "s-1", eventstore.NoStream(), Events("a", 2))
	r := mustAppend(t, s, "s-2", eventstore.NoStream(), Events("b", 1))
	h, err = s.Head(ctx(t))
	if err != nil || h != r.Position {
		t.Fatalf("head = %v (%v), want %v", h, err, r.Position)
	}
}

// testCountAfter counts after every position of a log that rejected appends along the way: a
// stale condition, a batch whose last event reuses an id (its first events were inserted before
// the refusal, on backends that check ids), and concurrent appends of which one wins.
func testCountAfter(t *testing.T, s eventstore.Store, f Features) {
	ok := s.Capabilities().Count
	if ok != (f.Count != NoCount) {
		t.Fatalf("store counts: %v; Features.Count = %d", ok, f.Count)
	}
	if !ok {
		if _, err := s.CountAfter(ctx(t), eventstore.Start); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("CountAfter of a store that does not count: %v, want errors.ErrUnsupported", err)
		}
		return
	}
	check := func(when string) {
		t.Helper()
		all, err := s.ReadAll(ctx(t), eventstore.Start, 0)
		if err != nil {
			t.Fatal(err)
		}
		positions := []eventstore.Position{eventstore.Start}
		for _, e := range all {
			positions = append(positions, e.Position)
		}
		for i, p := range positions {
			got, err := s.CountAfter(ctx(t), p)
			if err != nil {
				t.Fatalf("%s: count after %v: %v", when, p, err)
			}
			want := uint64(len(positions) - 1 - i)
			if got < want || (f.Count == CountExact && got != want) {
				t.Fatalf("%s: %d events after %v, counted %d (exact: %v)", when, want, p, got, f.Count == CountExact)
			}
		}
	}
	check("empty log")
	mustAppend(t, s, "s-1", eventstore.NoStream(), Events("a", 3))
	if _, err := s.Append(ctx(t), "s-1", eventstore.Exact(0), Events("stale", 2)); !errors.Is(err, eventstore.ErrConcurrency) {
		t.Fatalf("stale append: %v, want ErrConcurrency", err)
	}
	reused := append(Events("fresh", 2), Events("a", 1)...)
	if _, err := s.Append(ctx(t), "s-2", eventstore.NoStream(), reused); err == nil && !f.IdempotentByPosition {
		t.Fatal("batch reusing an event id accepted")
	}
	check("after refused appends")
	mustAppend(t, s, "s-3", eventstore.NoStream(), Events("b", 2))
	var wg sync.WaitGroup
	for i := range f.ConcurrentWriters {
		wg.Go(func() { _, _ = s.Append(ctx(t), "s-3", eventstore.Exact(1), Events(fmt.Sprint("w", i), 2)) })
	}
	wg.Wait()
	mustAppend(t, s, "s-4", eventstore.NoStream(), Events("c", 1))
	check("after concurrent appends")
}

// testClaims: an append claims its name for its stream in its own transaction; a name claimed
// already fails the append with ErrClaimed and stores nothing; an append that stores nothing
// claims nothing; of appends racing for one name, one wins.
func testClaims(t *testing.T, s eventstore.Store, f Features) {
	if !f.Claims {
		if _, keeps := s.Claim("n"); keeps || s.Capabilities().Claims {
			t.Fatal("the store keeps claims: declare Features.Claims")
		}
		return
	}
	if !s.Capabilities().Claims {
		t.Fatal("the store's Capabilities declare no claims")
	}
	if _, keeps := s.Claim("n"); !keeps {
		t.Fatal("Claim reported no claims")
	}
	claim := func(name, stream string, exp eventstore.ExpectedRevision, prefix string) error {
		opt, _ := s.Claim(name)
		_, err := s.Append(ctx(t), stream, exp, Events(prefix, 1), opt)
		return err
	}
	claimed := func(name, want string) {
		t.Helper()
		got, err := s.Claimed(ctx(t), name)
		if err != nil || got != want {
			t.Fatalf("Claimed(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	claimed("n1", "")
	if err := claim("n1", "s-1", eventstore.NoStream(), "a"); err != nil {
		t.Fatal(err)
	}
	claimed("n1", "s-1")
	if err := claim("n1", "s-2", eventstore.NoStream(), "b"); !errors.Is(err, eventstore.ErrClaimed) {
		t.Fatalf("second claim of n1: %v, want ErrClaimed", err)
	}
	if evs, err := s.ReadStream(ctx(t), "s-2", 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("the refused append stored %d events (%v)", len(evs), err)
	}
	claimed("n1", "s-1")
	if err := claim("n3", "s-1", eventstore.NoStream(), "c"); !errors.Is(err, eventstore.ErrConcurrency) {
		t.Fatalf("append to an existing stream with no-stream: %v, want a conflict", err)
	}
	claimed("n3", "")
	errs := make([]error, f.ConcurrentWriters)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = claim("n4", fmt.Sprint("r-", i), eventstore.NoStream(), fmt.Sprint("r", i)) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("appends %d and %d both claimed n4", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, eventstore.ErrClaimed):
			t.Fatalf("append %d: %v, want ErrClaimed", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no append claimed n4")
	}
	claimed("n4", fmt.Sprint("r-", winner))
}

// EarlierStreamsClaimed checks a SQL store's claims migration: s's inquiry streams, made before
// the store kept claims, each claim their own name once the migration runs, and other streams
// claim nothing. exec runs a statement on s's database; reopen migrates it again and returns the
// store.
func EarlierStreamsClaimed(t *testing.T, s eventstore.Store, exec func(query string) error, reopen func() eventstore.Store) {
	t.Helper()
	streams := []string{"inquiry-t1-a", "inquiry-t1-b", "inquiry-t2-a", "tenant-t1"}
	for i, stream := range streams {
		mustAppend(t, s, stream, eventstore.NoStream(), Events(fmt.Sprint("e", i), 2))
	}
	for _, q := range []string{`DROP TABLE stream_claims`, `DELETE FROM schema_migrations WHERE component = 'eventstore' AND version = 2`} {
		if err := exec(q); err != nil {
			t.Fatal(err)
		}
	}
	c := reopen()
	if !c.Capabilities().Claims {
		t.Fatal("the store keeps no claims")
	}
	for _, stream := range streams {
		want := stream
		if stream == "tenant-t1" {
			want = ""
		}
		if got, err := c.Claimed(ctx(t), stream); err != nil || got != want {
			t.Fatalf("Claimed(%s) = %q, %v; want %q", stream, got, err, want)
		}
	}
}

// SQLite opens an embedded event store on a new file of its own, closed when the test ends, and
// returns the file's handle with it.
func SQLite(t *testing.T) (*sqldb.DB, *sqlite.Store) {
	t.Helper()
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := sqlite.New(t.Context(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db, s
}
