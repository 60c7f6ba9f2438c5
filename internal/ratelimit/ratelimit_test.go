package ratelimit_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/ratelimit"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestParseRate(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]ratelimit.Rate{
		"10/m": {Events: 10, Per: time.Minute}, "20/s": {Events: 20, Per: time.Second},
		"1/h": {Events: 1, Per: time.Hour}, "off": {Off: true},
	} {
		got, err := ratelimit.ParseRate(spec)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", spec, got, err, want)
		}
	}
	for _, bad := range []string{"", "10", "0/s", "-1/s", "10/d", "x/m", "on"} {
		if _, err := ratelimit.ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
	if s := (ratelimit.Rate{Events: 10, Per: time.Minute}).String(); s != "10/m" {
		t.Errorf("String = %q", s)
	}
}

// TestBurstThenRefill: a key gets its burst, is then refused with the time until its next token,
// and is allowed again once the clock has moved that far. Other keys are unaffected.
func TestBurstThenRefill(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	l := ratelimit.New(ratelimit.Rate{Events: 10, Per: time.Minute, Burst: 3}, clk.Now)
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, retry := l.Allow("a")
	if ok || retry != 6*time.Second {
		t.Fatalf("after the burst: ok=%v retry=%v, want refused for 6s", ok, retry)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key was refused")
	}
	clk.Advance(5 * time.Second)
	if ok, retry := l.Allow("a"); ok || retry != time.Second {
		t.Fatalf("5s later: ok=%v retry=%v, want refused for 1s", ok, retry)
	}
	clk.Advance(time.Second)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("refused after the retry time")
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("a refused request must not have banked a token")
	}
}

func TestOffAllowsAll(t *testing.T) {
	t.Parallel()
	l := ratelimit.New(ratelimit.Rate{Off: true}, nil)
	for range 1000 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatal("an Off limiter refused")
		}
	}
	var nilLimiter *ratelimit.Keyed
	if ok, _ := nilLimiter.Allow("a"); !ok {
		t.Fatal("a nil limiter refused")
	}
}

// TestKeysAreBounded: idle buckets are dropped once refilled; while all are in use a new key is
// refused rather than growing memory.
func TestKeysAreBounded(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	l := ratelimit.New(ratelimit.Rate{Events: 1, Per: time.Second, Burst: 2}, clk.Now)
	l.SetMaxKeys(4)
	for i := range 4 {
		if ok, _ := l.Allow(fmt.Sprint("k", i)); !ok {
			t.Fatalf("key %d refused", i)
		}
	}
	if ok, retry := l.Allow("new"); ok || retry != time.Second {
		t.Fatalf("a fifth key while four are busy: ok=%v retry=%v", ok, retry)
	}
	if ok, _ := l.Allow("k0"); !ok {
		t.Fatal("a known key was refused while the table is full")
	}
	clk.Advance(2 * time.Second) // every bucket has refilled
	if ok, _ := l.Allow("new"); !ok {
		t.Fatal("new key refused after idle buckets refilled")
	}
	if n := l.Len(); n != 1 {
		t.Fatalf("%d keys tracked after the sweep, want 1", n)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	l := ratelimit.New(ratelimit.Rate{Events: 1, Per: time.Hour, Burst: 5}, clk.Now)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				if ok, _ := l.Allow("shared"); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 5 {
		t.Fatalf("%d allowed, want exactly the burst of 5", allowed)
	}
}

// TestAllowNIsAllOrNone: a byte budget takes a read's size at once; a take larger than what is
// left is refused whole (nothing taken) with the time until it fits, and one above the burst never
// fits.
func TestAllowNIsAllOrNone(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	l := ratelimit.New(ratelimit.Rate{Events: 600, Per: time.Minute, Burst: 600}, clk.Now)
	if ok, _ := l.AllowN("a", 500); !ok {
		t.Fatal("500 of 600 refused")
	}
	ok, retry := l.AllowN("a", 200)
	if ok || retry != 10*time.Second {
		t.Fatalf("200 with 100 left: ok=%v retry=%v, want refused for 10s", ok, retry)
	}
	if ok, _ := l.AllowN("a", 100); !ok {
		t.Fatal("the refused take was not all or none")
	}
	if ok, _ := l.AllowN("b", 601); ok {
		t.Fatal("a take above the burst was allowed")
	}
}
