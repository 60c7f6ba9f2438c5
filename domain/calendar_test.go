package domain_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
)

func mustPolicy(t testing.TB, js string) *domain.SLAPolicy {
	t.Helper()
	p, err := domain.ParseSLAPolicy([]byte(js))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// calendars used by the property tests: office hours across both of Berlin's 2026 DST changes with
// holidays, hours that span the 02:00–03:00 gap, New York's changes, and around the clock.
func propertyCalendars(t *testing.T) map[string]*domain.Calendar {
	t.Helper()
	return map[string]*domain.Calendar{
		"berlin-office": mustPolicy(t, `{"time_zone":"Europe/Berlin",
			"business_hours":{"mon":["09:00","17:00"],"tue":["09:00","17:00"],"wed":["09:00","17:00"],"thu":["09:00","17:00"],"fri":["09:00","13:30"]},
			"holidays":["2026-03-30","2026-10-26","2026-12-24","2026-12-25"],"targets":{"normal":{"resolution":"8h"}}}`).Calendar(),
		"berlin-night": mustPolicy(t, `{"time_zone":"Europe/Berlin",
			"business_hours":{"sun":["01:00","04:00"],"sat":["22:00","24:00"],"wed":["00:00","24:00"]},
			"targets":{"normal":{"resolution":"8h"}}}`).Calendar(),
		"new-york": mustPolicy(t, `{"time_zone":"America/New_York",
			"business_hours":{"sun":["00:00","24:00"],"mon":["08:00","20:00"]},"holidays":["2026-11-02"],
			"targets":{"normal":{"resolution":"8h"}}}`).Calendar(),
		"around-the-clock": mustPolicy(t, `{"time_zone":"Australia/Lord_Howe","holidays":["2026-04-05"],
			"targets":{"normal":{"resolution":"8h"}}}`).Calendar(),
	}
}

// starts are instants around DST changes (Europe 2026-03-29 and 2026-10-25, US 2026-03-08 and
// 2026-11-01, Lord Howe's half hour on 2026-04-05 and 2026-10-04) and holidays, plus random ones.
func starts(r *rand.Rand) []time.Time {
	base := []time.Time{
		time.Date(2026, 3, 28, 20, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC),
		time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Date(2026, 10, 24, 23, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 25, 0, 59, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC),
		time.Date(2026, 4, 4, 14, 0, 0, 0, time.UTC), time.Date(2026, 10, 3, 15, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 23, 16, 59, 0, 0, time.UTC), time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC),
	}
	lo := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for range 300 {
		base = append(base, time.Unix(lo+r.Int64N(365*86400), 0).UTC())
	}
	return base
}

func durations(r *rand.Rand) []time.Duration {
	out := []time.Duration{0, time.Second, time.Minute, 30 * time.Minute, time.Hour, 90 * time.Minute, 8 * time.Hour, 24 * time.Hour, 100 * time.Hour}
	for range 20 {
		out = append(out, time.Duration(r.Int64N(int64(200*time.Hour))).Truncate(time.Second))
	}
	return out
}

// TestCalendarAddBetweenProperties checks, across DST changes and holidays, that Between inverts
// Add, that Add is monotonic and additive, and that a positive Add ends inside business hours.
func TestCalendarAddBetweenProperties(t *testing.T) {
	t.Parallel()
	for name, cal := range propertyCalendars(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			ds := durations(r)
			for _, s := range starts(r) {
				for _, d := range ds {
					end := cal.Add(s, d)
					if got := cal.Between(s, end); got != d {
						t.Fatalf("Between(%v, Add(%v, %v)=%v) = %v", s, s, d, end, got)
					}
					if end.Before(s) {
						t.Fatalf("Add(%v, %v) = %v is before the start", s, d, end)
					}
					if d > 0 && cal.Between(end.Add(-time.Nanosecond), end) != time.Nanosecond {
						t.Fatalf("Add(%v, %v) = %v does not end in business time", s, d, end)
					}
				}
				for i := 1; i < len(ds); i++ {
					a, b := ds[i-1], ds[i]
					if a <= b && cal.Add(s, a).After(cal.Add(s, b)) {
						t.Fatalf("not monotonic at %v: Add(%v) after Add(%v)", s, a, b)
					}
					if a > 0 && b > 0 && !cal.Add(cal.Add(s, a), b).Equal(cal.Add(s, a+b)) {
						t.Fatalf("not additive at %v: %v then %v = %v, together %v", s, a, b, cal.Add(cal.Add(s, a), b), cal.Add(s, a+b))
					}
				}
			}
		})
	}
}

// TestCalendarDSTAndHolidays pins concrete answers a reader can check by hand.
func TestCalendarDSTAndHolidays(t *testing.T) {
	t.Parallel()
	cals := propertyCalendars(t)
	berlin := zone(t, "Europe/Berlin")
	tests := []struct {
		name  string
		cal   string
		start time.Time
		d     time.Duration
		want  time.Time
	}{
		// Friday 12:30 + 2h: 1h until 13:30, weekend, Monday 2026-03-30 is a holiday, Tuesday 10:00.
		{"skips weekend and holiday across spring DST", "berlin-office", time.Date(2026, 3, 27, 12, 30, 0, 0, berlin), 2 * time.Hour,
			time.Date(2026, 3, 31, 10, 0, 0, 0, berlin)},
		// Sunday 01:00–04:00 on the spring-forward day has 2 real hours (02:00–03:00 does not exist).
		{"spring-forward night is an hour short", "berlin-night", time.Date(2026, 3, 29, 1, 0, 0, 0, berlin), 2 * time.Hour,
			time.Date(2026, 3, 29, 4, 0, 0, 0, berlin)},
		// On the fall-back Sunday 01:00–04:00 has 4 real hours.
		{"fall-back night is an hour long", "berlin-night", time.Date(2026, 10, 25, 1, 0, 0, 0, berlin), 4 * time.Hour,
			time.Date(2026, 10, 25, 4, 0, 0, 0, berlin)},
		// Wednesday 23rd 16:00 + 2h: one hour that day; the 24th and 25th are holidays, then the
		// weekend; the second hour ends Monday 28th 10:00.
		{"christmas", "berlin-office", time.Date(2026, 12, 23, 16, 0, 0, 0, berlin), 2 * time.Hour,
			time.Date(2026, 12, 28, 10, 0, 0, 0, berlin)},
		{"around the clock skips its holiday", "around-the-clock", time.Date(2026, 4, 4, 23, 0, 0, 0, zone(t, "Australia/Lord_Howe")), 2 * time.Hour,
			time.Date(2026, 4, 6, 1, 0, 0, 0, zone(t, "Australia/Lord_Howe"))},
	}
	for _, tt := range tests {
		if got := cals[tt.cal].Add(tt.start, tt.d); !got.Equal(tt.want) {
			t.Errorf("%s: Add = %v, want %v", tt.name, got.In(tt.want.Location()), tt.want)
		}
	}
}

func TestParseSLAPolicyRejects(t *testing.T) {
	t.Parallel()
	const targets = `"targets":{"normal":{"first_response":"1h","resolution":"8h"}}`
	tests := map[string]string{
		"unknown field":        `{"time_zone":"UTC",` + targets + `,"extra":1}`,
		"no zone":              `{` + targets + `}`,
		"bad zone":             `{"time_zone":"Mars/Olympus",` + targets + `}`,
		"local zone":           `{"time_zone":"Local",` + targets + `}`,
		"bad weekday":          `{"time_zone":"UTC","business_hours":{"monday":["09:00","17:00"]},` + targets + `}`,
		"bad time":             `{"time_zone":"UTC","business_hours":{"mon":["9:00","17:00"]},` + targets + `}`,
		"close before open":    `{"time_zone":"UTC","business_hours":{"mon":["17:00","09:00"]},` + targets + `}`,
		"after midnight":       `{"time_zone":"UTC","business_hours":{"mon":["09:00","24:30"]},` + targets + `}`,
		"no open day":          `{"time_zone":"UTC","business_hours":{},` + targets + `}`,
		"bad holiday":          `{"time_zone":"UTC","holidays":["25.12.2026"],` + targets + `}`,
		"duplicate holiday":    `{"time_zone":"UTC","holidays":["2026-12-25","2026-12-25"],` + targets + `}`,
		"no targets":           `{"time_zone":"UTC","targets":{}}`,
		"unknown priority":     `{"time_zone":"UTC","targets":{"p1":{"resolution":"8h"}}}`,
		"bad duration":         `{"time_zone":"UTC","targets":{"high":{"resolution":"8 hours"}}}`,
		"negative duration":    `{"time_zone":"UTC","targets":{"high":{"resolution":"-1h"}}}`,
		"tiny duration":        `{"time_zone":"UTC","targets":{"high":{"resolution":"10s"}}}`,
		"warning out of range": `{"time_zone":"UTC",` + targets + `,"warning_at":1.5}`,
		"trailing data":        `{"time_zone":"UTC",` + targets + `} {}`,
		"not json":             `time_zone: UTC`,
	}
	for name, js := range tests {
		if _, err := domain.ParseSLAPolicy([]byte(js)); err == nil {
			t.Errorf("%s: accepted %s", name, js)
		} else if !strings.Contains(err.Error(), ":") {
			t.Errorf("%s: error %q names no field", name, err)
		}
	}
	p := mustPolicy(t, `{"time_zone":"Europe/Berlin","business_hours":{"mon":["09:00","17:00"]},"holidays":["2026-12-25"],`+targets+`}`)
	if p.WarningAt != domain.DefaultWarningAt {
		t.Fatalf("warning_at = %v", p.WarningAt)
	}
	again := mustPolicy(t, string(p.Encode()))
	if string(again.Encode()) != string(p.Encode()) {
		t.Fatalf("encode is not stable: %s vs %s", again.Encode(), p.Encode())
	}
}
