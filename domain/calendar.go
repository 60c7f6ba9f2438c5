package domain

import (
	"math"
	"slices"
	"time"
)

// Calendar measures business time: the hours a tenant promises to work, in its IANA time zone, minus
// holidays. Hours are wall-clock times of each local day, so a day on which daylight saving time
// starts or ends has one hour more or less of business time when its hours span the change. The
// zero-hours case (no business hours configured) is around the clock; holidays are closed all day in
// both cases.
//
// Add and Between cost O(days at both ends + holidays and zone transitions in between): whole weeks
// are counted by arithmetic (the nominal week, minus holidays, plus each day on which the zone's
// offset changes), never by walking the days.
type Calendar struct {
	loc      *time.Location
	hours    [7]span // by time.Weekday; zero span: closed
	holidays map[civilDate]bool
	closed   []int64          // holidays on open weekdays, as day numbers, sorted
	nominal  [7]time.Duration // wall-clock length of each weekday's hours
	week     time.Duration    // sum of nominal: the business time of a week without holidays or offset changes
}

// span is [start, end) in minutes after local midnight; end may be 24*60.
type span struct{ start, end int }

func (s span) open() bool { return s.end > s.start }

type civilDate struct {
	y int
	m time.Month
	d int
}

func dateOf(t time.Time) civilDate {
	y, m, d := t.Date()
	return civilDate{y, m, d}
}

// A day number counts local days since 1970-01-01 (day 0, a Thursday).
func dayNumOf(c civilDate) int64 {
	return time.Date(c.y, c.m, c.d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

func civilOf(n int64) civilDate { return dateOf(time.Unix(n*86400, 0).UTC()) }

func weekdayOf(n int64) time.Weekday { return time.Weekday(((n % 7) + 7 + 4) % 7) }

// MaxCalendarWeeks is the horizon of Add: when d of business time does not pass within this many
// weeks after start, Add returns the local midnight at the horizon instead. ParseSLAPolicy refuses
// targets that could come near it (see MaxSLATargetYears).
const MaxCalendarWeeks = 200 * 53

// NewCalendar returns a calendar. hours maps a weekday to its [open, close) wall-clock times in
// minutes after midnight; a nil map means around the clock. It fails when no weekday is open.
func NewCalendar(loc *time.Location, hours map[time.Weekday][2]int, holidays []time.Time) (*Calendar, error) {
	if loc == nil {
		return nil, Invalid("time_zone", "is required")
	}
	c := &Calendar{loc: loc, holidays: map[civilDate]bool{}}
	anyOpen := false
	for wd := time.Sunday; wd <= time.Saturday; wd++ {
		if hours == nil {
			c.hours[wd] = span{0, 24 * 60}
		} else if h, ok := hours[wd]; ok {
			if h[0] < 0 || h[1] > 24*60 || h[0] >= h[1] {
				return nil, Invalid("business_hours", "%s: opening must be before closing, within the day", wd)
			}
			c.hours[wd] = span{h[0], h[1]}
		}
		anyOpen = anyOpen || c.hours[wd].open()
		c.nominal[wd] = time.Duration(c.hours[wd].end-c.hours[wd].start) * time.Minute
		c.week += c.nominal[wd]
	}
	if !anyOpen {
		return nil, Invalid("business_hours", "no weekday is open")
	}
	for _, h := range holidays {
		d := dateOf(h)
		if c.holidays[d] {
			continue
		}
		c.holidays[d] = true
		if n := dayNumOf(d); c.hours[weekdayOf(n)].open() {
			c.closed = append(c.closed, n)
		}
	}
	slices.Sort(c.closed)
	return c, nil
}

// Location is the calendar's time zone.
func (c *Calendar) Location() *time.Location { return c.loc }

// Week is the business time of a week without holidays or changes of the zone's offset.
func (c *Calendar) Week() time.Duration { return c.week }

// window returns the business interval of local day n, or ok=false when the day is closed.
func (c *Calendar) window(n int64) (from, to time.Time, ok bool) {
	d := civilOf(n)
	s := c.hours[weekdayOf(n)]
	if !s.open() || c.holidays[d] {
		return time.Time{}, time.Time{}, false
	}
	// time.Date normalizes wall times that do not exist (inside a spring-forward gap); a close at
	// 24:00 is the next day's midnight.
	from = time.Date(d.y, d.m, d.d, 0, s.start, 0, 0, c.loc)
	to = time.Date(d.y, d.m, d.d, 0, s.end, 0, 0, c.loc)
	if !to.After(from) {
		return time.Time{}, time.Time{}, false
	}
	return from, to, true
}

// dayNum returns the number of t's local day.
func (c *Calendar) dayNum(t time.Time) int64 { return dayNumOf(dateOf(t.In(c.loc))) }

// midnight returns the start of local day n.
func (c *Calendar) midnight(n int64) time.Time {
	d := civilOf(n)
	return time.Date(d.y, d.m, d.d, 0, 0, 0, 0, c.loc)
}

// dayDelta is a day whose business time differs from its weekday's nominal hours: a holiday, or a
// day on which the zone's offset changes.
type dayDelta struct {
	day   int64
	delta time.Duration
}

// exceptions returns the days in [lo, hi) whose business time is not their weekday's nominal one,
// sorted, each with its actual minus nominal business time.
func (c *Calendar) exceptions(lo, hi int64) []dayDelta {
	var days []int64
	i, _ := slices.BinarySearch(c.closed, lo)
	for ; i < len(c.closed) && c.closed[i] < hi; i++ {
		days = append(days, c.closed[i])
	}
	// Every offset change: the local days of the instants just before and at it (and, so that no
	// normalization of a wall time near midnight escapes, the days on either side) are candidates;
	// a candidate whose window is nominal after all has delta zero and is dropped.
	end := time.Unix((hi+2)*86400, 0)
	around := func(before, after time.Time) {
		for n := c.dayNum(before) - 1; n <= c.dayNum(after)+1; n++ {
			if n >= lo && n < hi {
				days = append(days, n)
			}
		}
	}
	for t := time.Unix((lo-2)*86400, 0).In(c.loc); t.Before(end); {
		_, next := t.ZoneBounds()
		if next.IsZero() {
			break // no further offset changes
		}
		if next.After(t) {
			if !next.Before(end) {
				break
			}
			around(next.Add(-time.Nanosecond), next)
			t = next
			continue
		}
		// ZoneBounds can be stuck at an instant (beyond a zone's table, where its rule is
		// evaluated a year at a time, a leap year's end is misplaced by a day): walk past it in
		// steps of three hours, comparing offsets (no zone changes twice within three hours).
		_, off := t.Zone()
		for range 16 {
			u := t.Add(3 * time.Hour)
			if _, o := u.Zone(); o != off {
				around(t, u)
				off = o
			}
			t = u
			if _, next := t.ZoneBounds(); next.After(t) {
				break
			}
		}
	}
	slices.Sort(days)
	days = slices.Compact(days)
	out := make([]dayDelta, 0, len(days))
	for _, n := range days {
		var actual time.Duration
		if from, to, ok := c.window(n); ok {
			actual = to.Sub(from)
		}
		if d := actual - c.nominal[weekdayOf(n)]; d != 0 {
			out = append(out, dayDelta{n, d})
		}
	}
	return out
}

// weekSpan measures the business time of whole weeks from local day lo. It knows the exceptions of
// its first weeks days, and extends on demand.
type weekSpan struct {
	c      *Calendar
	lo     int64
	weeks  int64
	ex     []dayDelta
	prefix []time.Duration // prefix[i] = sum of ex[:i].delta
}

func (c *Calendar) weekSpan(lo int64, n int64) *weekSpan {
	w := &weekSpan{c: c, lo: lo, prefix: []time.Duration{0}}
	w.extend(n)
	return w
}

// extend makes w know the exceptions of its first n weeks.
func (w *weekSpan) extend(n int64) {
	if n <= w.weeks {
		return
	}
	for _, e := range w.c.exceptions(w.lo+7*w.weeks, w.lo+7*n) {
		w.ex = append(w.ex, e)
		w.prefix = append(w.prefix, w.prefix[len(w.prefix)-1]+e.delta)
	}
	w.weeks = n
}

// of returns the business time of the first n weeks of w; n must not exceed w.weeks.
func (w *weekSpan) of(n int64) time.Duration {
	hi := w.lo + 7*n
	i, _ := slices.BinarySearchFunc(w.ex, hi, func(e dayDelta, t int64) int {
		switch {
		case e.day < t:
			return -1
		case e.day > t:
			return 1
		}
		return 0
	})
	return time.Duration(n)*w.c.week + w.prefix[i]
}

// maxWeeks bounds a whole-week count so that its nominal business time cannot overflow.
func (c *Calendar) maxWeeks() int64 {
	return min(MaxCalendarWeeks, int64(math.MaxInt64/2/c.week))
}

// addDay advances start through local day n: it returns the end when d fits in the day's business
// time after start, or else what remains of d.
func (c *Calendar) addDay(n int64, start time.Time, d time.Duration) (time.Time, time.Duration, bool) {
	from, to, ok := c.window(n)
	if !ok || !to.After(start) {
		return time.Time{}, d, false
	}
	cur := from
	if start.After(cur) {
		cur = start
	}
	if avail := to.Sub(cur); d <= avail {
		return cur.Add(d), 0, true
	} else {
		return time.Time{}, d - avail, false
	}
}

// Add returns the instant at which d of business time has passed after start. Add(start, 0) is
// start itself; a positive d never ends outside business hours except exactly at a closing time.
// When d does not pass within MaxCalendarWeeks, Add returns the local midnight at that horizon.
func (c *Calendar) Add(start time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return start
	}
	n := c.dayNum(start)
	// The first two days by steps: start lies in the first, so every later window begins after it.
	for range 2 {
		if end, rest, ok := c.addDay(n, start, d); ok {
			return end
		} else {
			d = rest
		}
		n++
	}
	// The largest count of whole weeks whose business time is less than d: estimated from the
	// nominal week, corrected by what holidays and offset changes took, then bisected.
	limit := c.maxWeeks()
	hi := min(limit, int64(d/c.week)+1)
	w := c.weekSpan(n, hi)
	for w.of(hi) < d && hi < limit {
		hi = min(limit, hi+int64((d-w.of(hi))/c.week)+1)
		w.extend(hi)
	}
	if w.of(hi) < d {
		return c.midnight(n + 7*hi)
	}
	lo := int64(0) // w.of(lo) < d <= w.of(hi)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if w.of(mid) < d {
			lo = mid
		} else {
			hi = mid
		}
	}
	d -= w.of(lo)
	n += 7 * lo
	for range 8 {
		if end, rest, ok := c.addDay(n, start, d); ok {
			return end
		} else {
			d = rest
		}
		n++
	}
	return c.midnight(n) // unreachable: the week after lo holds at least d
}

// Between returns the business time in [a, b); zero when b is not after a. It saturates at the
// largest Duration.
func (c *Calendar) Between(a, b time.Time) time.Duration {
	if !b.After(a) {
		return 0
	}
	first := c.dayNum(a)
	last := c.dayNum(b)
	if !c.midnight(last).Before(b) {
		last--
	}
	days := last - first + 1
	if days <= 18 {
		return c.betweenDays(first, last, a, b)
	}
	// Two days by steps at the start, two to eight at the end, whole weeks in between: all of
	// their windows lie within [a, b).
	mid := days - 4
	weeks := mid / 7
	if weeks > c.maxWeeks() {
		return math.MaxInt64
	}
	sum := c.betweenDays(first, first+1, a, b)
	sum += c.weekSpan(first+2, weeks).of(weeks)
	sum += c.betweenDays(first+2+7*weeks, last, a, b)
	return sum
}

// betweenDays returns the business time in [a, b) of local days first through last.
func (c *Calendar) betweenDays(first, last int64, a, b time.Time) time.Duration {
	var sum time.Duration
	for n := first; n <= last; n++ {
		from, to, ok := c.window(n)
		if !ok {
			continue
		}
		if a.After(from) {
			from = a
		}
		if b.Before(to) {
			to = b
		}
		if to.After(from) {
			sum += to.Sub(from)
		}
	}
	return sum
}
