package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/casebook/casebook/eventstore"
)

// channelFor names the notification channel of the events table in schema. Channels are per
// database, so the schema keeps stores in one database apart; names are at most 63 bytes.
func channelFor(schema string) string {
	c := "casebook_events." + schema
	if len(c) > 63 {
		sum := sha256.Sum256([]byte(schema))
		c = "casebook_events." + hex.EncodeToString(sum[:16])
	}
	return c
}

func (s *Store) waitCh() (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed.Load() {
		return nil, eventstore.ErrClosed
	}
	return s.wake, nil
}

func (s *Store) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isClosed.Load() {
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

// requestNotify asks the notifier for a notification after an append has committed.
func (s *Store) requestNotify() {
	select {
	case s.notify <- struct{}{}:
	default: // one is already due and will be sent after this commit
	}
}

// notifier sends one notification per request. Requests made while one is being sent coalesce into
// the next, so under load there is at most one notifying transaction per Store in flight. A pending
// request is still sent at Close.
func (s *Store) notifier() {
	defer s.wg.Done()
	for {
		select {
		case <-s.notify:
			s.sendNotify(s.closing)
		case <-s.closing.Done():
			select {
			case <-s.notify:
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				s.sendNotify(ctx)
				cancel()
			default:
			}
			return
		}
	}
}

// sendNotify notifies the channel. The notification carries no data, so its commit need not wait
// for the WAL flush. A lost notification only delays subscribers until their next poll.
func (s *Store) sendNotify(ctx context.Context) {
	_, _ = s.pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '')`, s.channel)
}

// startListener starts the listening connection once and returns a channel closed after its first
// attempt to LISTEN, successful or not.
func (s *Store) startListener() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listening == nil {
		s.listening = make(chan struct{})
		s.wg.Add(1)
		go s.listen(s.listening)
	}
	return s.listening
}

// listen holds a connection that LISTENs on the store's channel and broadcasts every notification,
// reconnecting with backoff until Close.
func (s *Store) listen(ready chan struct{}) {
	defer s.wg.Done()
	var once sync.Once
	signal := func() { once.Do(func() { close(ready) }) }
	defer signal()
	delay := 50 * time.Millisecond
	for {
		_ = s.listenOnce(signal)
		signal()
		if s.closing.Err() != nil || pause(s.closing, delay) != nil {
			return
		}
		delay = min(2*delay, s.poll)
	}
}

func (s *Store) listenOnce(ready func()) error {
	pc, err := s.pool.Acquire(s.closing)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	if _, err := conn.Exec(s.closing, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	ready()
	s.broadcast() // appends may have committed while nobody listened
	for {
		if _, err := conn.WaitForNotification(s.closing); err != nil {
			return err
		}
		s.broadcast()
	}
}
