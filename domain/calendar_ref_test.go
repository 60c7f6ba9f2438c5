package domain_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
)

// refCalendar is the calendar as it was before whole weeks were counted by arithmetic: it steps
// day by day. It is the specification the property tests compare Calendar with.
type refCalendar struct {
	loc      *time.Location
	hours    [7][2]int
	holidays map[[3]int]bool
}

func newRefCalendar(loc *time.Location, hours map[time.Weekday][2]int, holidays []time.Time) *refCalendar {
	c := &refCalendar{loc: loc, holidays: map[[3]int]bool{}}
	for wd := time.Sunday; wd <= time.Saturday; wd++ {
		if hours == nil {
			c.hours[wd] = [2]int{0, 24 * 60}
		} else {
			c.hours[wd] = hours[wd]
		}
	}
	for _, h := range holidays {
		y, m, d := h.Date()
		c.holidays[[3]int{y, int(m), d}] = true
	}
	return c
}

func (c *refCalendar) window(day time.Time) (from, to time.Time, ok bool) {
	y, m, d := day.Date()
	s := c.hours[day.Weekday()]
	if s[1] <= s[0] || c.holidays[[3]int{y, int(m), d}] {
		return time.Time{}, time.Time{}, false
	}
	from = time.Date(y, m, d, 0, s[0], 0, 0, c.loc)
	to = time.Date(y, m, d, 0, s[1], 0, 0, c.loc)
	if !to.After(from) {
		return time.Time{}, time.Time{}, false
	}
	return from, to, true
}

func (c *refCalendar) midnight(t time.Time) time.Time {
	y, m, d := t.In(c.loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, c.loc)
}

func refNextDay(day time.Time) time.Time {
	y, m, d := day.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, day.Location())
}

func (c *refCalendar) Add(start time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return start
	}
	day := c.midnight(start)
	for range 100000 {
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
		day = refNextDay(day)
	}
	panic("reference calendar: no business time within 100000 days")
}

func (c *refCalendar) Between(a, b time.Time) time.Duration {
	if !b.After(a) {
		return 0
	}
	var sum time.Duration
	for day := c.midnight(a); day.Before(b); day = refNextDay(day) {
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

var refZones = []string{"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Tokyo", "Europe/Berlin"}

// randomHours returns random business hours: nil (around the clock) now and then, otherwise one to
// seven open weekdays on the half hour or quarter, some spanning 01:00–03:00 where the zones change
// their offset, some closing at 24:00.
func randomHours(r *rand.Rand) map[time.Weekday][2]int {
	if r.IntN(8) == 0 {
		return nil
	}
	hours := map[time.Weekday][2]int{}
	for len(hours) == 0 {
		for wd := time.Sunday; wd <= time.Saturday; wd++ {
			if r.IntN(3) == 0 {
				continue
			}
			var from, to int
			switch r.IntN(4) {
			case 0: // around the night's offset changes
				from, to = r.IntN(5)*30, 60+r.IntN(8)*30
			case 1: // until midnight
				from, to = r.IntN(48)*30, 24*60
			default:
				from = r.IntN(24*4) * 15
				to = from + 15 + r.IntN(24*4)*15
			}
			if to > 24*60 {
				to = 24 * 60
			}
			if from < to {
				hours[wd] = [2]int{from, to}
			}
		}
	}
	return hours
}

func randomHolidays(r *rand.Rand, lo time.Time, days int) []time.Time {
	var out []time.Time
	for range r.IntN(40) {
		out = append(out, lo.AddDate(0, 0, r.IntN(days)))
	}
	return out
}

// TestCalendarMatchesReference compares Add and Between with the day-stepping reference on
// thousands of random calendars (six zones, among them Lord Howe's half-hour DST), holidays, starts
// and targets up to ten weeks, including ends and intervals that cross offset changes and holidays.
func TestCalendarMatchesReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(46, 7))
	lo := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const span = 3 * 365
	for i := range 3000 {
		loc := zone(t, refZones[i%len(refZones)])
		hours := randomHours(r)
		holidays := randomHolidays(r, lo, span)
		cal, err := domain.NewCalendar(loc, hours, holidays)
		if err != nil {
			t.Fatal(err)
		}
		ref := newRefCalendar(loc, hours, holidays)
		for range 6 {
			start := lo.Add(time.Duration(r.Int64N(int64(span * 24 * time.Hour)))).Truncate(time.Minute)
			if r.IntN(4) == 0 { // on a wall-clock boundary
				start = start.In(loc).Truncate(15 * time.Minute)
			}
			d := time.Duration(r.Int64N(int64(10 * 7 * 24 * time.Hour))).Truncate(time.Minute)
			if r.IntN(5) == 0 {
				d = time.Duration(1+r.IntN(600)) * time.Minute
			}
			where := fmt.Sprintf("case %d: %s hours %v holidays %d start %v d %v", i, loc, hours, len(holidays), start, d)
			want := ref.Add(start, d)
			if got := cal.Add(start, d); !got.Equal(want) {
				t.Fatalf("%s: Add = %v, reference %v", where, got.In(loc), want.In(loc))
			}
			end := start.Add(time.Duration(r.Int64N(int64(20 * 7 * 24 * time.Hour))))
			if got, want := cal.Between(start, end), ref.Between(start, end); got != want {
				t.Fatalf("%s: Between(start, %v) = %v, reference %v", where, end, got, want)
			}
			if got := cal.Between(start, want); got != d {
				t.Fatalf("%s: Between(start, Add) = %v", where, got)
			}
		}
	}
}

// TestCalendarLongTargetsMatchReference compares the new and the reference calendar on the long
// targets the day-stepping one was too slow (and, over ten years, too bounded) for: a year of
// business time at one hour a weekday, over 35 years of DST changes and holidays.
func TestCalendarLongTargetsMatchReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(46, 8))
	lo := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	weekdays := map[time.Weekday][2]int{}
	for wd := time.Monday; wd <= time.Friday; wd++ {
		weekdays[wd] = [2]int{9 * 60, 10 * 60}
	}
	night := map[time.Weekday][2]int{time.Sunday: {60, 180}, time.Saturday: {22 * 60, 24 * 60}}
	for _, name := range refZones {
		for _, hours := range []map[time.Weekday][2]int{weekdays, night, nil} {
			loc := zone(t, name)
			holidays := randomHolidays(r, lo, 40*365)
			cal, _ := domain.NewCalendar(loc, hours, holidays)
			ref := newRefCalendar(loc, hours, holidays)
			for _, d := range []time.Duration{8760 * time.Hour, 1000 * time.Hour, 8760*time.Hour - time.Minute} {
				start := lo.Add(time.Duration(r.Int64N(int64(365 * 24 * time.Hour))))
				want := ref.Add(start, d)
				if got := cal.Add(start, d); !got.Equal(want) {
					t.Fatalf("%s %v: Add(%v, %v) = %v, reference %v", name, hours, start, d, got, want)
				}
				if got := cal.Between(start, want); got != d {
					t.Fatalf("%s %v: Between(%v, %v) = %v, want %v", name, hours, start, want, got, d)
				}
				end := want.Add(time.Duration(r.Int64N(int64(30 * 24 * time.Hour))))
				if got, want := cal.Between(start, end), ref.Between(start, end); got != want {
					t.Fatalf("%s %v: Between(%v, %v) = %v, reference %v", name, hours, start, end, got, want)
				}
			}
		}
	}
}

// TestEveryAcceptedPolicyComputes checks that the corners ParseSLAPolicy accepts — the smallest
// business week it allows with the largest target, the most holidays, hours only inside the night
// of an offset change — compute their clocks from starts spread across ten years, end within the
// horizon, and invert (Between(start, Add(start, d)) == d); and that the next step past each bound
// is refused with a message naming it.
func TestEveryAcceptedPolicyComputes(t *testing.T) {
	t.Parallel()
	// 1h42m a week is the least that holds a year of business time within MaxSLATargetYears.
	smallest := `"business_hours":{"mon":["09:00","10:42"]}`
	var many []string
	for i := range domain.MaxSLAHolidays {
		many = append(many, `"`+time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 7*i).Format(time.DateOnly)+`"`)
	}
	manyHolidays := `"holidays":[` + strings.Join(many, ",") + `]`
	year := `"targets":{"low":{"first_response":"8760h","resolution":"8760h"},"high":{"first_response":"1m","resolution":"1m"}}`
	policies := map[string]string{
		"smallest week":                  `{"time_zone":"America/New_York",` + smallest + `,` + year + `}`,
		"smallest week, most holidays":   `{"time_zone":"Australia/Lord_Howe",` + smallest + `,` + manyHolidays + `,` + year + `}`,
		"one hour a weekday":             `{"time_zone":"Europe/London","business_hours":{"mon":["09:00","10:00"],"tue":["09:00","10:00"],"wed":["09:00","10:00"],"thu":["09:00","10:00"],"fri":["09:00","10:00"]},` + year + `}`,
		"the night of the offset change": `{"time_zone":"Europe/Berlin","business_hours":{"sun":["01:00","03:00"]},` + year + `}`,
		"around the clock, holidays":     `{"time_zone":"Asia/Tokyo",` + manyHolidays + `,` + year + `}`,
	}
	lo := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	horizon := lo.AddDate(10+domain.MaxSLATargetYears+25, 0, 0)
	for name, js := range policies {
		p := mustPolicy(t, js)
		cal := p.Calendar()
		for i := range 40 {
			start := lo.Add(time.Duration(i) * 10 * 365 * 24 * time.Hour / 40).Add(time.Duration(i) * 37 * time.Minute)
			for _, d := range []time.Duration{time.Minute, 8760 * time.Hour} {
				end := cal.Add(start, d)
				if end.Before(start) || end.After(horizon) {
					t.Fatalf("%s: Add(%v, %v) = %v", name, start, d, end)
				}
				if got := cal.Between(start, end); got != d {
					t.Fatalf("%s: Between(%v, Add(%v)=%v) = %v", name, start, d, end, got)
				}
			}
		}
		q := inquiryForSLA(t, lo)
		if sla := p.SLA(q); sla.ResolutionDueAt.IsZero() || sla.FirstResponseDueAt.IsZero() {
			t.Fatalf("%s: no clock %+v", name, sla)
		}
	}
	refused := map[string][2]string{
		"week too small":    {`{"time_zone":"UTC","business_hours":{"mon":["09:00","10:41"]},` + year + `}`, "at most 100 years"},
		"target too long":   {`{"time_zone":"UTC","targets":{"low":{"resolution":"8761h"}}}`, "between 0 and 8760h"},
		"too many holidays": {`{"time_zone":"UTC",` + strings.Replace(manyHolidays, "[", `["2020-01-01",`, 1) + `,` + year + `}`, "at most 1000"},
	}
	for name, c := range refused {
		if _, err := domain.ParseSLAPolicy([]byte(c[0])); err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Fatalf("%s: error %v, want one saying %q", name, err, c[1])
		}
	}
}

// inquiryForSLA returns a new inquiry of priority low received at at.
func inquiryForSLA(t *testing.T, at time.Time) *domain.Inquiry {
	t.Helper()
	evs, err := domain.Receive(domain.NewInquiry{
		ID: "i1", TenantID: "t1", Source: domain.SourcePublicForm, Receipt: "R1", Priority: domain.PriorityLow,
		Requester: domain.Requester{Name: "Ada", Email: "ada@example.com"}, Subject: "Help", Message: "Hi",
	})
	if err != nil {
		t.Fatal(err)
	}
	q := &domain.Inquiry{}
	for _, e := range evs {
		q.Apply(e, at)
	}
	return q
}

// BenchmarkCalendarAddYear measures Add of a year of business time at one hour a weekday (about
// 35 years of days) in a DST zone.
func BenchmarkCalendarAddYear(b *testing.B) {
	p := mustPolicy(b, `{"time_zone":"Europe/Berlin","business_hours":{"mon":["09:00","10:00"],"tue":["09:00","10:00"],"wed":["09:00","10:00"],"thu":["09:00","10:00"],"fri":["09:00","10:00"]},"holidays":["2026-12-24","2026-12-25","2030-01-01"],"targets":{"low":{"resolution":"8760h"}}}`)
	cal := p.Calendar()
	start := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	for b.Loop() {
		cal.Add(start, 8760*time.Hour)
	}
}
