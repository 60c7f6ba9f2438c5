package app_test

import (
	"testing"
	"time"

	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/duejobs"
)

// TestYearLongSLATargetSchedules: a policy of an hour a weekday with a year's resolution target
// (about 35 years of days), which the schedules subscriber could not compute before, is accepted,
// and an inquiry under it gets its SLA jobs, due decades ahead in business hours. On SQLite and
// Postgres.
func TestYearLongSLATargetSchedules(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		d.setPolicy(t, `{"time_zone":"Europe/Berlin","business_hours":{"mon":["09:00","10:00"],"tue":["09:00","10:00"],
			"wed":["09:00","10:00"],"thu":["09:00","10:00"],"fri":["09:00","10:00"]},"holidays":["2026-12-24","2026-12-25"],
			"targets":{"normal":{"first_response":"8760h","resolution":"8760h"}}}`)
		id := apptest.Intake(t, d.a, d.tenant, "k1")
		apptest.CatchUp(t, d.a)
		jobs, err := d.a.DueJobs.List(t.Context(), d.tenant, duejobs.ListFilter{Inquiry: id, State: duejobs.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 4 {
			t.Fatalf("jobs %+v", jobs)
		}
		berlin, _ := time.LoadLocation("Europe/Berlin")
		for _, j := range jobs {
			local := j.DueAt.In(berlin)
			if local.Year() < 2050 || local.Year() > 2070 || local.Hour() < 9 || local.Hour() > 10 || local.Weekday() == time.Saturday || local.Weekday() == time.Sunday {
				t.Fatalf("%s/%s due %v", j.Kind, j.Target, local)
			}
		}
	})
}
