package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/internal/pgtest"
)

// newPool connects to a fresh schema; it is closed when t ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newStore(t testing.TB, pool *pgxpool.Pool, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.New(t.Context(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	eventstoretest.Exercise(t, func(t *testing.T) eventstore.Store {
		return newStore(t, newPool(t), postgres.Options{})
	}, eventstoretest.Features{SubscribeBatch: postgres.SubscribeBatch, Count: eventstoretest.CountAtLeast, Claims: true})
}

// TestClaimsMigrationClaimsEarlierInquiries: see eventstoretest.EarlierStreamsClaimed.
func TestClaimsMigrationClaimsEarlierInquiries(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	eventstoretest.EarlierStreamsClaimed(t, newStore(t, pool, postgres.Options{}), func(q string) error {
		_, err := pool.Exec(t.Context(), q)
		return err
	}, func() eventstore.Store { return newStore(t, pool, postgres.Options{}) })
}

func TestDuplicateEventIDIsNotConcurrency(t *testing.T) {
	t.Parallel()
	s := newStore(t, newPool(t), postgres.Options{})
	ctx := t.Context()
	ev := eventstoretest.Events("a", 1)
	if _, err := s.Append(ctx, "s-1", eventstore.NoStream(), append(ev, ev...)); err == nil || errors.Is(err, eventstore.ErrConcurrency) {
		t.Fatalf("duplicate id in one batch: err = %v, want a plain error", err)
	}
	if _, err := s.Append(ctx, "s-1", eventstore.NoStream(), ev); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, "s-2", eventstore.NoStream(), ev)
	if err == nil || errors.Is(err, eventstore.ErrConcurrency) {
		t.Fatalf("id reused on another stream: err = %v, want a plain error", err)
	}
	var ae *eventstore.AppendError
	if errors.As(err, &ae) {
		t.Fatalf("id reused on another stream: err = %#v, want no AppendError", err)
	}
}

// Appends with Any that lose a revision race retry instead of failing.
func TestConcurrentAnyAppendsAllLand(t *testing.T) {
	t.Parallel()
	s := newStore(t, newPool(t), postgres.Options{})
	const writers, each = 8, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.Append(t.Context(), "s-1", eventstore.Any(), eventstoretest.Events(fmt.Sprint(w, "-", i), 1)); err != nil {
					t.Errorf("writer %d: %v", w, err)
				}
			}
		})
	}
	wg.Wait()
	got, err := s.ReadStream(t.Context(), "s-1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers*each {
		t.Fatalf("stream has %d events, want %d", len(got), writers*each)
	}
	for i, e := range got {
		if e.Revision != uint64(i) {
			t.Fatalf("event %d has revision %d", i, e.Revision)
		}
	}
}

// A subscriber whose fallback poll is an hour away still sees appends made through another pool,
// as another process would: the wake-up comes from NOTIFY.
func TestSubscribeWakesOnNotify(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	subPool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(subPool.Close)
	sub := newStore(t, subPool, postgres.Options{PollInterval: time.Hour})
	writer, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Close() })

	got := make(chan eventstore.RecordedEvent, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- sub.Subscribe(ctx, eventstore.Start, func(_ context.Context, evs []eventstore.RecordedEvent) error {
			for _, e := range evs {
				got <- e
			}
			return nil
		})
	}()
	for i := range 5 {
		ev := eventstoretest.Events(fmt.Sprint("n", i), 1)
		if _, err := writer.Append(t.Context(), fmt.Sprint("s-", i), eventstore.NoStream(), ev); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-got:
			if e.ID != ev[0].ID {
				t.Fatalf("delivered %s, want %s", e.ID, ev[0].ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("append %d not delivered", i)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe returned %v, want context.Canceled", err)
	}
}

func TestCloseEndsSubscriptions(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open(t.Context(), pgtest.URL(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	if _, err := s.Append(t.Context(), "s-1", eventstore.NoStream(), eventstoretest.Events("a", 1)); err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- s.Subscribe(t.Context(), eventstore.Start, func(context.Context, []eventstore.RecordedEvent) error {
			close(started)
			return nil
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("subscription delivered nothing")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, eventstore.ErrClosed) {
			t.Fatalf("Subscribe returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Subscribe still running after Close")
	}
	if _, err := s.Append(t.Context(), "s-2", eventstore.NoStream(), eventstoretest.Events("b", 1)); !errors.Is(err, eventstore.ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A retried append whose events already landed at that revision is a concurrency conflict, not a
// duplicate-id error: the revision constraint is checked before the id constraint.
func TestRetriedAppendIsConcurrency(t *testing.T) {
	t.Parallel()
	s := newStore(t, newPool(t), postgres.Options{})
	ctx := t.Context()
	if _, err := s.Append(ctx, "s-1", eventstore.NoStream(), eventstoretest.Events("a", 2)); err != nil {
		t.Fatal(err)
	}
	ev := eventstoretest.Events("b", 1)
	if _, err := s.Append(ctx, "s-1", eventstore.Exact(1), ev); err != nil {
		t.Fatal(err)
	}
	retries := []struct {
		exp    eventstore.ExpectedRevision
		events []eventstore.EventData
	}{
		{eventstore.NoStream(), eventstoretest.Events("a", 2)},
		{eventstore.Exact(1), ev},
	}
	for _, r := range retries {
		_, err := s.Append(ctx, "s-1", r.exp, r.events)
		var ae *eventstore.AppendError
		if !errors.As(err, &ae) || !errors.Is(err, eventstore.ErrConcurrency) || ae.Actual != 2 {
			t.Errorf("retry at %s: err = %v, want an AppendError with ErrConcurrency and actual 2", r.exp, err)
		}
	}
}

// TestOpenPoolSize: Open's pool holds DefaultMaxConns connections unless the URL sets its own size.
func TestOpenPoolSize(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	for _, c := range []struct {
		url  string
		want int32
	}{{url, postgres.DefaultMaxConns}, {url + "&pool_max_conns=3", 3}} {
		s, err := postgres.Open(t.Context(), c.url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.PoolStat().MaxConns(); got != c.want {
			t.Errorf("%s: pool of %d connections, want %d", c.url, got, c.want)
		}
		_ = s.Close()
	}
}
