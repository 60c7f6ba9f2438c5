package domain

import (
	"fmt"
	"time"
)

// Calendar measures business time: the hours a tenant promises to work, in its IANA time zone, minus
// holidays. Hours are wall-clock times of each local day, so a day on which daylight saving time
// starts or ends has one hour more or less of business time when its hours span the change. The
// zero-hours case (no business hours configured) is around the clock; holidays are closed all day in
// both cases.
type Calendar struct {
	loc      *time.Location
	hours    [7]span // by time.Weekday; zero span: closed
	holidays map[civilDate]bool
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

// maxCalendarDays bounds every walk over days; a calendar with at least one open weekday reaches
// its next open day within a week plus the holidays in between.
const maxCalendarDays = 3700

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
	}
	if !anyOpen {
		return nil, Invalid("business_hours", "no weekday is open")
	}
	for _, h := range holidays {
		c.holidays[dateOf(h)] = true
	}
	return c, nil
}

// Location is the calendar's time zone.
func (c *Calendar) Location() *time.Location { return c.loc }

// window returns the business interval of the local day that starts at midnight day, or ok=false
// when the day is closed.
func (c *Calendar) window(day time.Time) (from, to time.Time, ok bool) {
	d := dateOf(day)
	s := c.hours[day.Weekday()]
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

// midnight returns the start of t's local day.
func (c *Calendar) midnight(t time.Time) time.Time {
	d := dateOf(t.In(c.loc))
	return time.Date(d.y, d.m, d.d, 0, 0, 0, 0, c.loc)
}

func nextDay(day time.Time) time.Time {
	d := dateOf(day)
	return time.Date(d.y, d.m, d.d+1, 0, 0, 0, 0, day.Location())
}

// Add returns the instant at which d of business time has passed after start. Add(start, 0) is
// start itself; a positive d never ends outside business hours except exactly at a closing time.
func (c *Calendar) Add(start time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return start
	}
	day := c.midnight(start)
	for range maxCalendarDays {
		if from, to, ok := c.window(day); ok && to.After(start) {
			cur := from
			if start.After(cur) {
				cur = start
			}
			if avail := to.Sub(cur); d <= avail {
				return cur.Add(d)
			} else {
				d -= avail
			}
		}
		day = nextDay(day)
	}
	panic(fmt.Sprintf("calendar: no business time within %d days", maxCalendarDays)) // NewCalendar rules this out
}

// Between returns the business time in [a, b); zero when b is not after a.
func (c *Calendar) Between(a, b time.Time) time.Duration {
	if !b.After(a) {
		return 0
	}
	var sum time.Duration
	for day := c.midnight(a); day.Before(b); day = nextDay(day) {
		from, to, ok := c.window(day)
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
