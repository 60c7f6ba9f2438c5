package fakeslack

import "time"

// RateLimit is a per-method budget: at most Budget calls in each Window of
// the server's clock. A window opens at the first call after the last one
// closed. Slack's real tiers are per app, workspace and method, with bursts
// allowed; a fixed window is our simplification.
type RateLimit struct {
	Budget int
	Window time.Duration
}

type rateWindow struct {
	start time.Time
	used  int
}

// SetRateLimit sets method's budget; a Budget of 0 or less removes it.
func (s *Server) SetRateLimit(method string, rl RateLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rl.Budget <= 0 || rl.Window <= 0 {
		delete(s.limits, method)
		delete(s.windows, method)
		return
	}
	s.limits[method] = rl
	delete(s.windows, method)
}

// admitLocked spends one call of method's budget, or says how long until the
// window closes.
func (s *Server) admitLocked(method string) (retryAfter time.Duration, ok bool) {
	rl, limited := s.limits[method]
	if !limited {
		return 0, true
	}
	now := s.clock.Now()
	w := s.windows[method]
	if w == nil || !now.Before(w.start.Add(rl.Window)) {
		w = &rateWindow{start: now}
		s.windows[method] = w
	}
	if w.used >= rl.Budget {
		return w.start.Add(rl.Window).Sub(now), false
	}
	w.used++
	return 0, true
}

// retryAfterSeconds rounds up to whole seconds, at least 1, as the header carries.
func retryAfterSeconds(d time.Duration) int {
	secs := int((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return secs
}
