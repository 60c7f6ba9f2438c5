package coalesce

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// queuedFor reports how many callers the call queued behind key's one in flight serves (0 when none is queued).
func (g *Group[K, V]) queuedFor(key K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.keys[key]
	if s == nil || s.queued == nil {
		return 0
	}
	return s.queued.callers
}

func (g *Group[K, V]) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.keys)
}

// blockingRead is a read that counts its calls, announces each on started and blocks it until
// released.
type blockingRead struct {
	calls   atomic.Int64
	started chan int64
	release chan struct{}
}

func newBlockingRead() *blockingRead {
	return &blockingRead{started: make(chan int64, 16), release: make(chan struct{}, 16)}
}

func (b *blockingRead) fn(ctx context.Context) (int64, error) {
	n := b.calls.Add(1)
	b.started <- n
	select {
	case <-b.release:
		return n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// waitQueued polls (bounded) until n callers wait for the call queued behind key's read in flight:
// released before they all asked, the read in flight would end and the next begin without the
// latecomers, which would then queue a third read that nobody releases.
func waitQueued(t *testing.T, g *Group[string, int64], key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.queuedFor(key) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d callers queued behind the read in flight", g.queuedFor(key), n)
		}
		runtime.Gosched()
	}
}

// TestLateCallersShareTheNextRead: callers that arrive while a read is in flight get neither that
// read's answer nor a read each: they share the one that starts after it ends.
func TestLateCallersShareTheNextRead(t *testing.T) {
	t.Parallel()
	var g Group[string, int64]
	r := newBlockingRead()
	first := make(chan int64)
	go func() { v, _ := g.Do(t.Context(), "k", r.fn); first <- v }()
	<-r.started // read 1 is in flight
	late := make(chan int64, 2)
	for range 2 {
		go func() { v, _ := g.Do(t.Context(), "k", r.fn); late <- v }()
	}
	waitQueued(t, &g, "k", 2)
	r.release <- struct{}{}
	if v := <-first; v != 1 {
		t.Fatalf("first caller got read %d, want 1", v)
	}
	if n := <-r.started; n != 2 {
		t.Fatalf("next read is %d, want 2", n)
	}
	r.release <- struct{}{}
	for range 2 {
		if v := <-late; v != 2 {
			t.Fatalf("a late caller got read %d, want 2 (the read after its arrival)", v)
		}
	}
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("%d reads for three callers, want 2", n)
	}
	if n := g.size(); n != 0 {
		t.Fatalf("%d idle keys kept", n)
	}
}

// TestCallerCancelLeavesTheReadToOthers: a caller whose context ends gets its error at once; the
// read it started goes on, uncancelled, and the callers queued behind it get theirs.
func TestCallerCancelLeavesTheReadToOthers(t *testing.T) {
	t.Parallel()
	var g Group[string, int64]
	r := newBlockingRead()
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error)
	go func() { _, err := g.Do(ctx, "k", r.fn); first <- err }()
	<-r.started
	late := make(chan int64)
	go func() { v, _ := g.Do(t.Context(), "k", r.fn); late <- v }()
	waitQueued(t, &g, "k", 1)
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	r.release <- struct{}{} // read 1 was not cancelled with its caller: it still waits for this
	<-r.started
	r.release <- struct{}{}
	if v := <-late; v != 2 {
		t.Fatalf("queued caller got read %d, want 2", v)
	}
}

// TestErrorsAreShared: a read's error reaches every caller it serves.
func TestErrorsAreShared(t *testing.T) {
	t.Parallel()
	var g Group[string, int64]
	r := newBlockingRead()
	boom := errors.New("boom")
	fails := func(ctx context.Context) (int64, error) {
		if _, err := r.fn(ctx); err != nil {
			return 0, err
		}
		return 0, boom
	}
	first := make(chan error)
	go func() { _, err := g.Do(t.Context(), "k", fails); first <- err }()
	<-r.started
	late := make(chan error, 2)
	for range 2 {
		go func() { _, err := g.Do(t.Context(), "k", fails); late <- err }()
	}
	waitQueued(t, &g, "k", 2)
	r.release <- struct{}{}
	<-r.started
	r.release <- struct{}{}
	for _, ch := range []chan error{first, late, late} {
		if err := <-ch; !errors.Is(err, boom) {
			t.Fatalf("a caller got %v, want the read's error", err)
		}
	}
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("%d reads for three callers, want 2", n)
	}
}

// TestNoAnswerPredatesItsCaller: under many concurrent callers of a few keys, every answer comes
// from a read that started after its caller called.
func TestNoAnswerPredatesItsCaller(t *testing.T) {
	t.Parallel()
	var g Group[int, int64]
	var clock atomic.Int64
	var reads atomic.Int64
	fn := func(context.Context) (int64, error) {
		reads.Add(1)
		v := clock.Add(1)
		runtime.Gosched()
		return v, nil
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for range 200 {
				asked := clock.Add(1)
				v, err := g.Do(context.Background(), i%3, fn)
				if err != nil || v <= asked {
					t.Errorf("asked at %d, answered from a read started at %d (%v)", asked, v, err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d reads for %d callers", reads.Load(), 64*200)
	if n := g.size(); n != 0 {
		t.Fatalf("%d idle keys kept", n)
	}
}
