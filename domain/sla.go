package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// SLAPolicy is a tenant's service-level policy: its business calendar and, per priority, how long
// (in business time) the first response and the resolution may take. A priority without targets
// has no SLA clock. The JSON shape is the one operators write:
//
//	{"time_zone":"Europe/Berlin","business_hours":{"mon":["09:00","17:00"],…},"holidays":["2026-12-25"],
//	 "targets":{"high":{"first_response":"1h","resolution":"8h"},…},"warning_at":0.8}
//
// No business_hours means around the clock. warning_at (default 0.8) is the fraction of a target's
// business time after which an SLA warning is due.
type SLAPolicy struct {
	TimeZone      string                  `json:"time_zone"`
	BusinessHours map[string][2]string    `json:"business_hours,omitempty"`
	Holidays      []string                `json:"holidays,omitempty"`
	Targets       map[Priority]SLATargets `json:"targets"`
	WarningAt     float64                 `json:"warning_at,omitempty"`

	cal *Calendar
}

// SLATargets are the business-time limits of one priority. A zero limit has no clock.
type SLATargets struct {
	FirstResponse Duration `json:"first_response,omitempty"`
	Resolution    Duration `json:"resolution,omitempty"`
}

// Duration is a time.Duration written in Go syntax ("1h30m") in JSON.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"1h30m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// SLA target names: the two clocks.
const (
	TargetFirstResponse = "first_response"
	TargetResolution    = "resolution"
)

// DefaultWarningAt is the fraction of a target after which its warning is due.
const DefaultWarningAt = 0.8

// Bounds of a policy, so that every policy ParseSLAPolicy accepts computes its clocks in bounded
// time: a target is at most a year of business time and needs at most MaxSLATargetYears of the
// policy's nominal business weeks; holidays are at most MaxSLAHolidays dates.
const (
	MaxSLATarget      = 365 * 24 * time.Hour
	MaxSLATargetYears = 100
	MaxSLAHolidays    = 1000
)

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// ParseSLAPolicy decodes and validates a policy strictly: unknown fields, unknown weekdays or
// priorities, malformed times, dates or durations, and an empty target set are validation errors.
func ParseSLAPolicy(b []byte) (*SLAPolicy, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p SLAPolicy
	if err := dec.Decode(&p); err != nil {
		return nil, Invalid("policy", "%v", err)
	}
	if dec.More() {
		return nil, Invalid("policy", "trailing data after the JSON object")
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *SLAPolicy) validate() error {
	if p.TimeZone == "" {
		return Invalid("time_zone", "is required (an IANA name such as Europe/Berlin)")
	}
	loc, err := time.LoadLocation(p.TimeZone)
	if err != nil || p.TimeZone == "Local" {
		return Invalid("time_zone", "unknown IANA time zone %q", p.TimeZone)
	}
	var hours map[time.Weekday][2]int
	if p.BusinessHours != nil {
		hours = map[time.Weekday][2]int{}
		for name, h := range p.BusinessHours {
			wd, ok := weekdays[name]
			if !ok {
				return Invalid("business_hours", "unknown weekday %q (use mon … sun)", name)
			}
			from, err1 := parseClock(h[0])
			to, err2 := parseClock(h[1])
			if err1 != nil || err2 != nil {
				return Invalid("business_hours", "%s: times are HH:MM, 00:00 to 24:00", name)
			}
			hours[wd] = [2]int{from, to}
		}
	}
	if len(p.Holidays) > MaxSLAHolidays {
		return Invalid("holidays", "%d dates; at most %d", len(p.Holidays), MaxSLAHolidays)
	}
	var holidays []time.Time
	seen := map[string]bool{}
	for _, h := range p.Holidays {
		d, err := time.Parse(time.DateOnly, h)
		if err != nil {
			return Invalid("holidays", "%q is not a date (YYYY-MM-DD)", h)
		}
		if seen[h] {
			return Invalid("holidays", "%s is listed twice", h)
		}
		seen[h] = true
		holidays = append(holidays, d)
	}
	if p.cal, err = NewCalendar(loc, hours, holidays); err != nil {
		return err
	}
	if len(p.Targets) == 0 {
		return Invalid("targets", "at least one priority needs a target")
	}
	for pr, t := range p.Targets {
		if _, err := ParsePriority("targets", string(pr)); err != nil {
			return err
		}
		for name, d := range map[string]Duration{TargetFirstResponse: t.FirstResponse, TargetResolution: t.Resolution} {
			if d < 0 || time.Duration(d) > MaxSLATarget {
				return Invalid("targets", "%s.%s must be between 0 and %s", pr, name, MaxSLATarget)
			}
			if d > 0 && time.Duration(d) < time.Minute {
				return Invalid("targets", "%s.%s must be at least 1m", pr, name)
			}
			if weeks := time.Duration(d) / p.cal.Week(); weeks > MaxSLATargetYears*52 {
				return Invalid("targets", "%s.%s of %s needs %d weeks of these business hours (%s a week); at most %d years: shorten it or open more hours",
					pr, name, time.Duration(d), weeks, p.cal.Week(), MaxSLATargetYears)
			}
		}
	}
	if p.WarningAt == 0 {
		p.WarningAt = DefaultWarningAt
	}
	if p.WarningAt <= 0 || p.WarningAt >= 1 {
		return Invalid("warning_at", "must be between 0 and 1 (exclusive)")
	}
	sort.Strings(p.Holidays)
	return nil
}

// parseClock reads HH:MM (00:00 … 24:00) as minutes after midnight.
func parseClock(s string) (int, error) {
	var h, m int
	if len(s) != 5 || s[2] != ':' || strings.ContainsAny(s, "+- ") {
		return 0, fmt.Errorf("bad time %q", s)
	}
	if _, err := fmt.Sscanf(s, "%02d:%02d", &h, &m); err != nil || h > 24 || m > 59 || (h == 24 && m != 0) {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return h*60 + m, nil
}

// Calendar returns the policy's business calendar. The policy must come from ParseSLAPolicy.
func (p *SLAPolicy) Calendar() *Calendar { return p.cal }

// Encode returns the policy's canonical JSON.
func (p *SLAPolicy) Encode() []byte {
	b, _ := json.Marshal(p)
	return b
}

// SLAPolicySet replaces a tenant's SLA policy (stream slapolicy-{tenant}). Policy is the canonical
// JSON of an SLAPolicy; inquiries received after it are measured by it.
type SLAPolicySet struct {
	Policy json.RawMessage `json:"policy"`
}

// EventType implements Event.
func (SLAPolicySet) EventType() string { return "SLAPolicySet" }

// SLATimes are an inquiry's SLA clock under a policy. A zero time means no clock (no target, or
// the clock is paused while waiting and its due time is not yet known).
type SLATimes struct {
	FirstResponseDueAt  time.Time `json:"first_response_due_at,omitzero"`
	FirstResponseWarnAt time.Time `json:"-"`
	ResolutionDueAt     time.Time `json:"resolution_due_at,omitzero"`
	ResolutionWarnAt    time.Time `json:"-"`
}

// SLA computes q's SLA clock under p. Both clocks run from the inquiry's receipt in business time;
// the resolution clock stops while the inquiry is waiting (on the requester). A clock whose target
// was met (first response given, inquiry resolved or cancelled) has no due time. The result
// depends only on the policy and q's events, so a replay of the log computes the same times.
func (p *SLAPolicy) SLA(q *Inquiry) SLATimes {
	var out SLATimes
	t, ok := p.Targets[q.Priority]
	if !ok || !q.Exists() || q.Archived || q.Erased {
		return out // an archived inquiry's clocks stand still (a new generation on unarchive)
	}
	cal := p.cal
	if t.FirstResponse > 0 && q.FirstRespondedAt.IsZero() && !q.Status.Terminal() {
		out.FirstResponseDueAt = cal.Add(q.CreatedAt, time.Duration(t.FirstResponse))
		out.FirstResponseWarnAt = cal.Add(q.CreatedAt, warnAfter(t.FirstResponse, p.WarningAt))
	}
	if t.Resolution > 0 && !q.Status.Terminal() {
		out.ResolutionDueAt = q.runningAdd(cal, time.Duration(t.Resolution))
		out.ResolutionWarnAt = q.runningAdd(cal, warnAfter(t.Resolution, p.WarningAt))
	}
	return out
}

func warnAfter(d Duration, at float64) time.Duration {
	return time.Duration(float64(d) * at).Truncate(time.Second)
}

// runningAdd returns when d of business time has run on the resolution clock, which runs from
// receipt and stops during waiting intervals; zero when the clock is stopped before d has run.
func (q *Inquiry) runningAdd(cal *Calendar, d time.Duration) time.Time {
	cur := q.CreatedAt
	for _, iv := range q.Paused {
		if ran := cal.Between(cur, iv[0]); ran >= d {
			return cal.Add(cur, d)
		} else {
			d -= ran
		}
		cur = iv[1]
	}
	if !q.PausedSince.IsZero() {
		if cal.Between(cur, q.PausedSince) >= d {
			return cal.Add(cur, d)
		}
		return time.Time{}
	}
	return cal.Add(cur, d)
}

// Elapsed returns the business time q took to its first response and, once resolved, to its
// resolution (the resolution clock's running time: waiting does not count). responded and resolved are
// false for a measure that does not exist yet.
func (p *SLAPolicy) Elapsed(q *Inquiry) (firstResponse time.Duration, responded bool, resolution time.Duration, resolved bool) {
	if !q.FirstRespondedAt.IsZero() {
		firstResponse, responded = p.cal.Between(q.CreatedAt, q.FirstRespondedAt), true
	}
	if q.Status == StatusResolved && !q.PausedSince.IsZero() {
		resolution = p.cal.Between(q.CreatedAt, q.PausedSince)
		for _, iv := range q.Paused {
			resolution -= p.cal.Between(iv[0], iv[1])
		}
		resolved = true
	}
	return firstResponse, responded, resolution, resolved
}
