package domain_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
)

// TestNoteRateLimit: the 61st note within an hour is refused with a RateLimitError that says when
// the oldest counted note leaves the window; at that instant a note is accepted again; and an
// inquiry folded anew from the same events decides the same (the limit is replay-safe).
func TestNoteRateLimit(t *testing.T) {
	t.Parallel()
	op := operator("p1")
	q := at(t, domain.StatusInProgress)
	var log []struct {
		e  domain.Event
		at time.Time
	}
	for i := range domain.MaxNotesPerHour {
		now := t0.Add(time.Duration(i) * 30 * time.Second)
		evs, err := q.AddNote(op, fmt.Sprint("note ", i), now)
		if err := apply(q, now, evs, err); err != nil {
			t.Fatalf("note %d: %v", i, err)
		}
		log = append(log, struct {
			e  domain.Event
			at time.Time
		}{evs[0], now})
	}
	now := t0.Add(40 * time.Minute)
	_, err := q.AddNote(op, "one more", now)
	var rl *domain.RateLimitError
	if !errors.As(err, &rl) || !errors.Is(err, domain.ErrRateLimited) || rl.RetryAfter != 20*time.Minute || rl.Limit != domain.MaxNotesPerHour {
		t.Fatalf("61st note: %v (%+v)", err, rl)
	}
	replayed := at(t, domain.StatusInProgress)
	for _, l := range log {
		replayed.Apply(l.e, l.at)
	}
	if _, err := replayed.AddNote(op, "one more", now); !errors.Is(err, domain.ErrRateLimited) {
		t.Fatalf("replayed fold decided %v", err)
	}
	if evs, err := q.AddNote(op, "one more", t0.Add(time.Hour)); err != nil || len(evs) != 1 {
		t.Fatalf("after the window: %v %v", evs, err)
	}
}

// TestFollowUpLimits: a follow-up due less than MinFollowUpDelay from now is a validation error;
// the 21st scheduling within an hour is rate limited, even when the earlier ones were cancelled.
func TestFollowUpLimits(t *testing.T) {
	t.Parallel()
	op := operator("p1")
	q := at(t, domain.StatusInProgress)
	now := t0.Add(time.Minute)
	for _, d := range []time.Duration{time.Nanosecond, time.Second, time.Minute - time.Nanosecond} {
		if _, err := q.ScheduleFollowUp(op, "tiny", now.Add(d), now, ""); !errors.Is(err, domain.ErrValidation) {
			t.Fatalf("follow-up in %v: %v", d, err)
		}
	}
	for i := range domain.MaxFollowUpsPerHour {
		id := fmt.Sprint("j", i)
		evs, err := q.ScheduleFollowUp(op, id, now.Add(time.Minute), now, "")
		if err := apply(q, now, evs, err); err != nil {
			t.Fatalf("follow-up %d: %v", i, err)
		}
		evs, err = q.CancelFollowUp(op, id)
		if err := apply(q, now, evs, err); err != nil {
			t.Fatal(err)
		}
	}
	_, err := q.ScheduleFollowUp(op, "again", now.Add(time.Hour), now.Add(59*time.Minute), "")
	var rl *domain.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Minute {
		t.Fatalf("21st follow-up: %v", err)
	}
	if _, err := q.ScheduleFollowUp(op, "again", now.Add(2*time.Hour), now.Add(time.Hour), ""); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// TestSchedulingExtremesCompute: the largest dates and durations the validators of due dates,
// follow-ups, archives and retention policies accept compute without overflow and encode (their
// times stay RFC 3339, before year 10000); the next step past each bound is refused.
func TestSchedulingExtremesCompute(t *testing.T) {
	t.Parallel()
	op := operator("p1")
	now := t0
	for _, at := range []time.Time{now.Add(domain.MaxScheduleAhead + time.Nanosecond), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Unix(1<<62, 0), time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)} {
		q := at_(t)
		if _, err := q.ScheduleFollowUp(op, "j", at, now, ""); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("follow-up at %v: %v", at, err)
		}
		if _, err := q.SetDueDate(op, at, now); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("due date %v: %v", at, err)
		}
		if _, err := q.Archive(domain.Principal{ID: "a", TenantID: "t1", Role: domain.RoleAdmin}, "done", at, now, ""); !errors.Is(err, domain.ErrValidation) && at.Sub(now) > domain.MaxRetention {
			t.Errorf("archive until %v: %v", at, err)
		}
	}
	q := at_(t)
	evs, err := q.ScheduleFollowUp(op, "j", now.Add(domain.MaxScheduleAhead), now, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(evs[0]); err != nil {
		t.Fatal(err)
	}
	// The longest retention rules, in days and in Go syntax, from the latest instant a clock
	// can read for a long while.
	maxDays := int64(domain.MaxRetention / (24 * time.Hour))
	for _, js := range []string{
		fmt.Sprintf(`{"classes":{"c":{"archived_for":"%dd","closed_for":"%dd"}},"default_class":"c"}`, maxDays, maxDays),
		fmt.Sprintf(`{"classes":{"c":{"archived_for":"%s"}},"default_class":"c"}`, domain.MaxRetention),
	} {
		p, err := domain.ParseRetentionPolicy([]byte(js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		at := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
		due, _ := p.DueAt(domain.RetentionFacts{ArchivedAt: at, ClosedAt: at})
		if !due.After(at) || due.Year() > 9999 {
			t.Fatalf("%s: due %v", js, due)
		}
		if _, err := json.Marshal(domain.InquiryArchived{RetainUntil: due}); err != nil {
			t.Fatal(err)
		}
	}
	for _, js := range []string{
		fmt.Sprintf(`{"classes":{"c":{"archived_for":"%dd"}}}`, maxDays+1),
		fmt.Sprintf(`{"classes":{"c":{"archived_for":"%s"}}}`, domain.MaxRetention+time.Second),
		`{"classes":{"c":{"archived_for":"9223372036854775807d"}}}`,
		`{"classes":{"c":{"archived_for":"2562047h47m16.854775807s"}}}`,
		`{"classes":{"c":{"archived_for":"99999999999h"}}}`,
	} {
		if _, err := domain.ParseRetentionPolicy([]byte(js)); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%s: %v", js, err)
		}
	}
}

func at_(t *testing.T) *domain.Inquiry { return at(t, domain.StatusInProgress) }

// TestInquiryCloneIsDeep: every map and slice of an Inquiry is copied by Clone, so a cached fold
// never shares state with the inquiry a command applies events to. A new reference field fails
// here until Clone copies it.
func TestInquiryCloneIsDeep(t *testing.T) {
	t.Parallel()
	q := &domain.Inquiry{
		FollowUps: map[string]domain.FollowUp{"j": {}}, Watchers: []domain.PrincipalID{"p"},
		Warnings: map[string]time.Time{"x": t0}, Breaches: map[string]time.Time{"x": t0},
		Paused: [][2]time.Time{{t0, t0}}, NoteTimes: []time.Time{t0}, FollowUpTimes: []time.Time{t0},
	}
	c := q.Clone()
	v, w := reflect.ValueOf(q).Elem(), reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		switch f.Type.Kind() {
		case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func:
			if v.Field(i).IsNil() {
				t.Fatalf("%s is nil in the fixture: set it, and copy it in Clone", f.Name)
			}
			if v.Field(i).Pointer() == w.Field(i).Pointer() {
				t.Fatalf("Clone shares %s", f.Name)
			}
		}
	}
	if !reflect.DeepEqual(q, c) {
		t.Fatal("Clone differs")
	}
}

// TestRateLimitSaysPlainTimes: the limit's explanation, shown in the console and in Slack, says
// its window and the wait in words, rounded up to the minute, not as Go durations.
func TestRateLimitSaysPlainTimes(t *testing.T) {
	for _, c := range []struct {
		wait time.Duration
		want string
	}{
		{59*time.Minute + 59*time.Second, "at most 60 notes per inquiry per hour; try again in 60 minutes"},
		{30 * time.Second, "at most 60 notes per inquiry per hour; try again in a minute"},
		{61 * time.Second, "at most 60 notes per inquiry per hour; try again in 2 minutes"},
	} {
		err := &domain.RateLimitError{What: "notes", Limit: 60, RetryAfter: c.wait}
		if got := err.Error(); got != c.want {
			t.Errorf("wait %s: %q, want %q", c.wait, got, c.want)
		}
	}
}
