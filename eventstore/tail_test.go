package eventstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// logOf is a log of n events at positions 1..n.
func logOf(n int) []RecordedEvent {
	out := make([]RecordedEvent, n)
	for i := range out {
		p := uint64(i + 1)
		out[i] = RecordedEvent{ID: fmt.Sprint("e", p), StreamID: "s", Revision: p - 1, Position: Position{Commit: p, Prepare: p},
			Type: "T", Data: fmt.Appendf(nil, `{"n":%d}`, p), Metadata: []byte(`{}`)}
	}
	return out
}

// backend serves reads of log after a position and counts them.
type backend struct {
	mu      sync.Mutex
	log     []RecordedEvent
	reads   int
	gate    chan struct{} // when set, each read signals entered, then waits for it
	entered chan struct{}
}

func gated(log []RecordedEvent) *backend {
	return &backend{log: log, gate: make(chan struct{}), entered: make(chan struct{}, 8)}
}

func (b *backend) read(from Position, limit int) func() ([]RecordedEvent, uint64, error) {
	return func() ([]RecordedEvent, uint64, error) {
		if b.gate != nil {
			b.entered <- struct{}{}
			<-b.gate
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.reads++
		var out []RecordedEvent
		for _, e := range b.log {
			if from.Less(e.Position) && len(out) < limit {
				e.Data, e.Metadata = slices.Clone(e.Data), slices.Clone(e.Metadata) // a read's bytes are its own
				out = append(out, e)
			}
		}
		return out, 0, nil
	}
}

func (b *backend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads
}

func TestTailServesFollowersFromOneRead(t *testing.T) {
	tl := NewTail(100)
	b := gated(logOf(10))
	epoch := make(chan struct{})
	const followers = 7
	joined := make(chan struct{}, followers)
	tl.joined = func() { joined <- struct{}{} }

	got := make([][]RecordedEvent, followers+1)
	var wg sync.WaitGroup
	wg.Go(func() {
		evs, _, err := tl.Fetch(Start, 100, epoch, b.read(Start, 100))
		if err != nil {
			t.Error(err)
		}
		got[0] = slices.Clone(evs)
		for i := range evs { // the reader's slice is its own: the followers' stay whole (-race sees a shared one)
			evs[i].Type = ""
		}
	})
	<-b.entered
	for i := 1; i <= followers; i++ {
		wg.Go(func() {
			evs, _, err := tl.Fetch(Start, 100, epoch, func() ([]RecordedEvent, uint64, error) {
				return nil, 0, errors.New("a follower read the backend")
			})
			if err != nil {
				t.Error(err)
			}
			got[i] = evs
		})
	}
	// The leader's read is blocked: every follower waits for it.
	for range followers {
		<-joined
	}
	close(b.gate)
	wg.Wait()
	if n := b.count(); n != 1 {
		t.Fatalf("backend reads = %d, want 1", n)
	}
	for i, evs := range got {
		if diff := cmp.Diff(b.log, evs); diff != "" {
			t.Fatalf("subscription %d got (-want +got):\n%s", i, diff)
		}
	}
	if s := tl.Stats(); s != (TailStats{Backend: 10, Shared: 70}) {
		t.Fatalf("stats = %+v, want 10 from the backend and 70 shared", s)
	}
}

// TestTailServesTheRunAndChecksItsBytes: a subscription reads from the kept run, in a slice of
// its own whose events' bytes it shares with the run; with CheckSharedEnv set, a subscription that
// changes them makes the next hand-out of that event panic.
func TestTailServesTheRunAndChecksItsBytes(t *testing.T) {
	t.Setenv(CheckSharedEnv, "1")
	tl := NewTail(100)
	b := &backend{log: logOf(10)}
	epoch := make(chan struct{})
	if _, _, err := tl.Fetch(Start, 100, epoch, b.read(Start, 100)); err != nil {
		t.Fatal(err)
	}
	from := b.log[4].Position
	evs, _, err := tl.Fetch(from, 3, nil, b.read(from, 3)) // another epoch: the run does not depend on it
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b.log[5:8], evs); diff != "" {
		t.Fatalf("from the run (-want +got):\n%s", diff)
	}
	evs[1] = RecordedEvent{} // the slice is the subscription's own
	again, _, _ := tl.Fetch(from, 3, nil, b.read(from, 3))
	if diff := cmp.Diff(b.log[5:8], again); diff != "" {
		t.Fatalf("after a subscriber changed its slice (-want +got):\n%s", diff)
	}
	if n := b.count(); n != 1 {
		t.Fatalf("backend reads = %d, want 1", n)
	}
	// At the run's end there is nothing to share: the backend is read.
	end := b.log[9].Position
	if evs, _, _ := tl.Fetch(end, 3, epoch, b.read(end, 3)); len(evs) != 0 || b.count() != 2 {
		t.Fatalf("at the end: %d events after %d backend reads, want 0 after 2", len(evs), b.count())
	}
	again[0].Data[0] = 'X' // bytes shared with the run: a subscription may not change them
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "e6 (s revision 5) changed after it was read") {
			t.Fatalf("a hand-out of the changed event: panic %q, want one naming the event", msg)
		}
	}()
	_, _, _ = tl.Fetch(from, 3, nil, b.read(from, 3))
}

// TestTailAnotherEpochTrustsOnlyEvents: a follower whose wake-up channel differs from the leader's
// (it took it after an append the leader's read may have missed) takes events from the leader's
// read, but never its "nothing new".
func TestTailAnotherEpochTrustsOnlyEvents(t *testing.T) {
	for _, tc := range []struct {
		name        string
		leader      int // the leader's position (index into the log, -1 for Start)
		follower    int
		joins       bool
		wantOwnRead bool
	}{
		{"same position, events", -1, -1, true, false},
		{"same position, nothing", 2, 2, true, true},
		{"later position", -1, 2, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := NewTail(100)
			b := gated(logOf(3))
			at := func(i int) Position {
				if i < 0 {
					return Start
				}
				return b.log[i].Position
			}
			joined := make(chan struct{}, 1)
			var release sync.Once
			open := func() { release.Do(func() { close(b.gate) }) }
			tl.joined = func() {
				if !tc.joins {
					t.Error("the follower waited for a read from another position")
					open()
				}
				joined <- struct{}{}
			}
			leader := make(chan error, 1)
			go func() {
				_, _, err := tl.Fetch(at(tc.leader), 100, "before an append", b.read(at(tc.leader), 100))
				leader <- err
			}()
			<-b.entered
			type result struct {
				evs []RecordedEvent
				own bool
			}
			done := make(chan result, 1)
			go func() {
				var own bool
				from := at(tc.follower)
				evs, _, err := tl.Fetch(from, 100, "after an append", func() ([]RecordedEvent, uint64, error) {
					own = true
					return logOf(4)[tc.follower+1:], 0, nil // the log has grown since the leader read
				})
				if err != nil {
					t.Error(err)
				}
				done <- result{evs, own}
			}()
			if tc.joins {
				<-joined
			} else {
				// It does not wait for the leader: its own read ends while the leader's is blocked.
				r := <-done
				done <- r
			}
			open()
			if err := <-leader; err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.own != tc.wantOwnRead {
				t.Fatalf("follower read the backend itself: %v, want %v", r.own, tc.wantOwnRead)
			}
			want := b.log[tc.follower+1:]
			if r.own {
				want = logOf(4)[tc.follower+1:]
			}
			if diff := cmp.Diff(want, r.evs, cmpEmpty); diff != "" {
				t.Fatalf("follower got (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTailJoinedReadThatFoundNothing: a follower at the log's end, under the leader's epoch, takes
// the leader's "nothing new" without reading; a follower further back does not wait for a read
// from further back (a subscription catching up may take long) and reads on its own.
func TestTailJoinedReadThatFoundNothing(t *testing.T) {
	tl := NewTail(100)
	b := gated(logOf(3))
	joined := make(chan struct{}, 1)
	tl.joined = func() { joined <- struct{}{} }
	epoch := make(chan struct{})
	end := b.log[2].Position
	go func() { _, _, _ = tl.Fetch(end, 10, epoch, b.read(end, 10)) }()
	<-b.entered
	done := make(chan []RecordedEvent, 1)
	go func() {
		evs, _, err := tl.Fetch(end, 10, epoch, func() ([]RecordedEvent, uint64, error) {
			return nil, 0, errors.New("the follower read the backend")
		})
		if err != nil {
			t.Error(err)
		}
		done <- evs
	}()
	<-joined
	close(b.gate)
	if evs := <-done; len(evs) != 0 {
		t.Fatalf("follower got %d events, want none", len(evs))
	}

	b = gated(logOf(3))
	tl = NewTail(100)
	var release sync.Once
	tl.joined = func() {
		t.Error("a follower waited for a read from before its position")
		release.Do(func() { close(b.gate) })
	}
	leader := make(chan struct{})
	go func() {
		defer close(leader)
		_, _, _ = tl.Fetch(Start, 10, epoch, b.read(Start, 10))
	}()
	<-b.entered
	var own bool
	evs, _, err := tl.Fetch(b.log[0].Position, 10, epoch, func() ([]RecordedEvent, uint64, error) {
		own = true
		return b.log[1:], 0, nil
	})
	release.Do(func() { close(b.gate) })
	<-leader
	if err != nil || !own || len(evs) != 2 {
		t.Fatalf("follower further on: own read %v, %d events, %v; want its own read of 2", own, len(evs), err)
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []RecordedEvent) bool {
	return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b)
})

func TestTailTrimsAndForgets(t *testing.T) {
	tl := NewTail(4)
	b := &backend{log: logOf(12)}
	// Pages of 3 extend the run; past 2*max it is cut back to the last max.
	from := Start
	for range 4 {
		evs, _, err := tl.Fetch(from, 3, nil, b.read(from, 3))
		if err != nil || len(evs) != 3 {
			t.Fatalf("page: %d events, %v", len(evs), err)
		}
		from = evs[2].Position
	}
	if n := b.count(); n != 4 {
		t.Fatalf("backend reads = %d, want 4", n)
	}
	old := b.log[2].Position
	if _, _, err := tl.Fetch(old, 3, nil, b.read(old, 3)); err != nil || b.count() != 5 {
		t.Fatalf("a position before the kept run: backend reads = %d, want 5 (%v)", b.count(), err)
	}
	kept := b.log[8].Position
	if _, _, err := tl.Fetch(kept, 3, nil, b.read(kept, 3)); err != nil || b.count() != 5 {
		t.Fatalf("a position in the kept run: backend reads = %d, want 5 (%v)", b.count(), err)
	}
	tl.Reset()
	if _, _, err := tl.Fetch(kept, 3, nil, b.read(kept, 3)); err != nil || b.count() != 6 {
		t.Fatalf("after Reset: backend reads = %d, want 6 (%v)", b.count(), err)
	}
}

func TestTailKeepsNeitherLargePagesNorReadsBegunBeforeReset(t *testing.T) {
	tl := NewTail(4)
	b := &backend{log: logOf(5)}
	if _, _, err := tl.Fetch(Start, 10, nil, b.read(Start, 10)); err != nil {
		t.Fatal(err)
	}
	if _, _, _ = tl.Fetch(Start, 10, nil, b.read(Start, 10)); b.count() != 2 {
		t.Fatalf("a page larger than the run was kept: backend reads = %d, want 2", b.count())
	}

	b = gated(logOf(3))
	tl = NewTail(4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = tl.Fetch(Start, 10, nil, b.read(Start, 10))
	}()
	<-b.entered
	tl.Reset() // a stored event changed while the read ran: its result may be stale
	close(b.gate)
	<-done
	if _, _, _ = tl.Fetch(Start, 10, nil, b.read(Start, 10)); b.count() != 2 {
		t.Fatalf("a read begun before Reset was kept: backend reads = %d, want 2", b.count())
	}
}
