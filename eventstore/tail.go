package eventstore

import (
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"sort"
	"sync"
)

// Tail lets the subscriptions of one store that follow the log read each event from the backend
// once, not once per subscriber: the first to read a page keeps it here, and the others read it
// from memory. It keeps the most recent run of events read, at most max, and the run is complete:
// it holds every event in (after, last], because only what a backend read returned as complete
// for its range is added. It holds events as the backend stores them (sealed members stay
// ciphertext); nothing here is opened.
//
// The subscriptions share the events' Data and Metadata with the Tail and with each other: each
// gets a slice of events of its own, but the bytes are one copy, which nobody may change (see
// Store.Subscribe). With CheckSharedEnv set to 1 the Tail checks that: it keeps a digest of each
// event it holds and panics when it would hand out an event whose bytes changed since it was read.
// `make test` sets it; production leaves it off (the digests cost a hash per event).
//
// A Tail serves Subscribe only. A backend whose stored events may change (RewriteData) resets it on
// every rewrite.
type Tail struct {
	mu     sync.Mutex
	max    int
	after  Position
	evs    []RecordedEvent
	flying []*flight // backend reads in progress
	resets int       // Reset calls: a read begun before one is not kept
	stats  TailStats
	joined func()              // tests: called when a caller waits for a read in flight
	sums   map[Position]uint64 // with CheckSharedEnv: each held event's digest (see Tail)
}

// TailEvents is how many events a store keeps for its subscriptions (a Tail's max): at 1,000
// intakes a second, a few seconds of log, so that a subscriber a batch or two behind the first
// still reads from memory. At 1 KB an event it is about 4 MB, and up to twice that between trims.
const TailEvents = 4096

// TailStats counts the events a Tail's subscriptions received: read from the backend, or from
// the Tail.
type TailStats struct {
	Backend uint64 `json:"backend"`
	Shared  uint64 `json:"shared"`
}

// flight is a backend read in progress, and then its result.
type flight struct {
	from  Position
	epoch any // the wake-up signal of the subscription that began it
	limit int
	reset int // the Tail's resets when the read began
	done  chan struct{}
	kept  bool            // the read succeeded and evs holds its events
	evs   []RecordedEvent // the read's events (their bytes shared with its caller)
	held  uint64
}

// NewTail returns a Tail that keeps the last max events read (it holds up to 2*max between trims).
func NewTail(max int) *Tail {
	t := &Tail{max: max}
	if os.Getenv(CheckSharedEnv) == "1" {
		t.sums = map[Position]uint64{}
	}
	return t
}

// CheckSharedEnv names the environment variable that, set to 1, makes every Tail created after
// it check that no subscription changes the event bytes it shares (see Tail).
const CheckSharedEnv = "CASEBOOK_CHECK_SHARED_EVENTS"

// Fetch returns the events after from, at most limit (> 0), for a subscription whose wake-up
// signal (the channel the next append closes) is epoch. They come from the kept run when it holds
// events after from; else from a backend read in flight from the same position; else from read,
// whose result is kept. held is what the answering read reported
// besides its events (Postgres: the largest transaction id held back), 0 when the kept run answered.
//
// A read that found nothing after from answers "nothing" only to callers of its own epoch: an
// append it may have missed closed the epoch's channel, so they wake again. Others read anew.
func (t *Tail) Fetch(from Position, limit int, epoch any, read func() ([]RecordedEvent, uint64, error)) ([]RecordedEvent, uint64, error) {
	t.mu.Lock()
	if evs := t.sharedLocked(t.after, t.evs, from, limit); evs != nil {
		t.mu.Unlock()
		return evs, 0, nil
	}
	var f *flight
	for _, g := range t.flying {
		// Only a read from the same position: one from further back (a subscription catching up,
		// a rebuild) may take long and not reach from.
		if g.limit == limit && g.from == from {
			f = g
			break
		}
	}
	if f != nil {
		t.mu.Unlock()
		if t.joined != nil {
			t.joined()
		}
		<-f.done
		t.mu.Lock()
		usable := f.kept && f.reset == t.resets
		var evs []RecordedEvent
		if usable {
			evs = t.sharedLocked(f.from, f.evs, from, limit)
		}
		if evs == nil {
			evs = t.sharedLocked(t.after, t.evs, from, limit)
		}
		if evs != nil {
			t.mu.Unlock()
			return evs, 0, nil
		}
		if usable && f.epoch == epoch {
			// The read found nothing after from, and it began under the caller's epoch: an append
			// it missed will wake the caller again.
			t.mu.Unlock()
			return nil, f.held, nil
		}
	}
	f = &flight{from: from, epoch: epoch, limit: limit, reset: t.resets, done: make(chan struct{})}
	t.flying = append(t.flying, f)
	t.mu.Unlock()
	evs, held, err := read()
	// A page larger than the run (a subscription catching up) is not kept; whoever waited for it
	// reads on its own.
	if err == nil && len(evs) <= t.max {
		f.evs, f.kept = slices.Clone(evs), true // the caller's slice is its own; the bytes are shared
	}
	t.mu.Lock()
	if f.reset == t.resets {
		t.addLocked(from, f.evs)
	}
	t.stats.Backend += uint64(len(evs))
	f.held = held
	t.flying = slices.DeleteFunc(t.flying, func(g *flight) bool { return g == f })
	t.mu.Unlock()
	close(f.done)
	return evs, held, err
}

// Stats returns the counts so far.
func (t *Tail) Stats() TailStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Reset forgets the kept run (a stored event was rewritten).
func (t *Tail) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.after, t.evs = Position{}, nil
	clear(t.sums)
	t.resets++
}

// sharedLocked returns the events of run (every event in (after, its last]) after from, at most
// limit, in a slice of the caller's own, or nil when the run does not cover from or holds nothing
// after it. Their bytes are shared (see Tail).
func (t *Tail) sharedLocked(after Position, run []RecordedEvent, from Position, limit int) []RecordedEvent {
	n := len(run)
	if n == 0 || from.Less(after) || !from.Less(run[n-1].Position) {
		return nil
	}
	i := sort.Search(n, func(i int) bool { return from.Less(run[i].Position) })
	out := slices.Clone(run[i:min(n, i+limit)])
	t.checkLocked(out)
	t.stats.Shared += uint64(len(out))
	return out
}

// digestSeed keys the event digests.
var digestSeed = maphash.MakeSeed()

func digest(e RecordedEvent) uint64 {
	return maphash.Bytes(digestSeed, e.Data)*31 + maphash.Bytes(digestSeed, e.Metadata)
}

// sumLocked records the digests of evs, which the run now holds (with CheckSharedEnv only).
func (t *Tail) sumLocked(evs []RecordedEvent) {
	if t.sums == nil {
		return
	}
	for _, e := range evs {
		t.sums[e.Position] = digest(e)
	}
}

// checkLocked panics when an event of evs changed since it was read (with CheckSharedEnv only): a
// subscription changed bytes that the others share.
func (t *Tail) checkLocked(evs []RecordedEvent) {
	if t.sums == nil {
		return
	}
	for _, e := range evs {
		if sum, ok := t.sums[e.Position]; ok && sum != digest(e) {
			panic(fmt.Sprintf("eventstore: event %s (%s revision %d) changed after it was read: subscriptions share events' bytes and must not change them",
				e.ID, e.StreamID, e.Revision))
		}
	}
}

// forgetLocked drops the digests of evs, which the run no longer holds (with CheckSharedEnv only).
func (t *Tail) forgetLocked(evs []RecordedEvent) {
	if t.sums == nil {
		return
	}
	for _, e := range evs {
		delete(t.sums, e.Position)
	}
}

// addLocked keeps evs, every event in (from, evs[len(evs)-1].Position] in log order; it takes
// ownership of evs' events.
func (t *Tail) addLocked(from Position, evs []RecordedEvent) {
	if len(evs) == 0 {
		return
	}
	n := len(t.evs)
	switch {
	case n > 0 && !from.Less(t.after) && !t.evs[n-1].Position.Less(from):
		// Starts inside the run or at its end: append what is newer.
		top := t.evs[n-1].Position
		i := sort.Search(len(evs), func(i int) bool { return top.Less(evs[i].Position) })
		t.sumLocked(evs[i:])
		t.evs = append(t.evs, evs[i:]...)
	case n == 0 || t.evs[n-1].Position.Less(evs[len(evs)-1].Position):
		// Newer and apart from the run: the last max events start a new run.
		if drop := len(evs) - t.max; drop > 0 {
			from, evs = evs[drop-1].Position, evs[drop:]
		}
		clear(t.sums)
		t.sumLocked(evs)
		t.after, t.evs = from, append([]RecordedEvent(nil), evs...)
	default:
		return // older than the run
	}
	if len(t.evs) > 2*t.max { // trimmed by halves, so an append moves O(1) events on average
		drop := len(t.evs) - t.max
		t.forgetLocked(t.evs[:drop])
		t.after = t.evs[drop-1].Position
		t.evs = append([]RecordedEvent(nil), t.evs[drop:]...)
	}
}
