package app_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/queries"
)

var dueT0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC) // a Monday

type dueBundle struct {
	a      *app.App
	clock  *apptest.Clock
	tenant domain.TenantID
	admin  domain.Principal
	op     domain.Principal
}

func dueSetup(t *testing.T, b apptest.Backend) dueBundle {
	t.Helper()
	clock := apptest.NewClock(dueT0)
	cfg := b.Config(t)
	cfg.Now, cfg.DueTick, cfg.Logger = clock.Now, -1, slog.New(slog.DiscardHandler)
	a := apptest.Open(t, cfg)
	ten, admin, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := a.Tenancy.CreatePrincipal(t.Context(), "acme", "Olga", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	return dueBundle{a: a, clock: clock, tenant: ten.ID, admin: admin, op: op}
}

// eachDue runs fn as a parallel subtest on every backend with a fresh bundle.
func eachDue(t *testing.T, fn func(t *testing.T, d dueBundle)) {
	t.Helper()
	for _, b := range apptest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, dueSetup(t, b))
		})
	}
}

func (d dueBundle) setPolicy(t *testing.T, js string) {
	t.Helper()
	if _, _, err := d.a.Commands.SetSLAPolicy(t.Context(), commands.SetSLAPolicy{Tenant: d.tenant, Actor: d.admin, Policy: []byte(js)}); err != nil {
		t.Fatal(err)
	}
}

func (d dueBundle) tick(t *testing.T) duejobs.TickResult {
	t.Helper()
	apptest.CatchUp(t, d.a)
	res, err := d.a.Ticker.Tick(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	apptest.CatchUp(t, d.a)
	return res
}

// types returns the event types of an inquiry's stream from revision from on.
func (d dueBundle) types(t *testing.T, id domain.InquiryID) []string {
	t.Helper()
	recs, err := d.a.Store.ReadStream(t.Context(), eventstore.InquiryStream(d.tenant, id), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Type)
	}
	return out
}

func (d dueBundle) pending(t *testing.T, id domain.InquiryID) []string {
	t.Helper()
	jobs, err := d.a.DueJobs.List(t.Context(), d.tenant, duejobs.ListFilter{Inquiry: id, State: duejobs.StatePending})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range jobs {
		out = append(out, j.Kind+"/"+j.Target)
	}
	slices.Sort(out)
	return out
}

const duePolicy = `{"time_zone":"UTC","targets":{"normal":{"first_response":"1h","resolution":"4h"}},"warning_at":0.5}`

// TestSLAWarningBreachEscalation: an inquiry under a policy gets its warning, then its breach, then
// an escalation, each once, as time passes; the claim (its first response) ends the first-response
// jobs; the resolution ends the rest. On SQLite and Postgres.
func TestSLAWarningBreachEscalation(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		d.setPolicy(t, duePolicy)
		id := apptest.Intake(t, d.a, d.tenant, "k1")
		apptest.CatchUp(t, d.a)
		want := []string{"sla_breach/first_response", "sla_breach/resolution", "sla_warning/first_response", "sla_warning/resolution"}
		if diff := cmp.Diff(want, d.pending(t, id)); diff != "" {
			t.Fatalf("jobs after intake: %s", diff)
		}
		if res := d.tick(t); res.Claimed != 0 {
			t.Fatalf("claimed before anything was due: %+v", res)
		}
		d.clock.Advance(31 * time.Minute)
		if res := d.tick(t); res.Fired != 1 {
			t.Fatalf("warning tick: %+v", res)
		}
		d.clock.Advance(30 * time.Minute)
		if res := d.tick(t); res.Fired != 1 {
			t.Fatalf("breach tick: %+v", res)
		}
		if res := d.tick(t); res.Fired != 1 { // the escalation, due at the breach
			t.Fatalf("escalation tick: %+v", res)
		}
		if diff := cmp.Diff([]string{"InquiryReceived", "SLAWarning", "SLABreached", "InquiryEscalated"}, d.types(t, id)); diff != "" {
			t.Fatalf("events: %s", diff)
		}
		q, err := d.a.Commands.Load(t.Context(), d.tenant, id)
		if err != nil || q.EscalationLevel != 1 || !slices.Equal(q.Breached(), []string{domain.TargetFirstResponse}) {
			t.Fatalf("inquiry: level %d breached %v %v", q.EscalationLevel, q.Breached(), err)
		}
		if _, err := d.a.Commands.Claim(t.Context(), commands.Claim{Target: commands.Target{Tenant: d.tenant, InquiryID: id, Actor: d.op}}); err != nil {
			t.Fatal(err)
		}
		apptest.CatchUp(t, d.a)
		if diff := cmp.Diff([]string{"sla_breach/resolution", "sla_warning/resolution"}, d.pending(t, id)); diff != "" {
			t.Fatalf("jobs after the claim: %s", diff)
		}
		apptest.Transition(t, d.a, d.op, id, domain.StatusResolved, "")
		apptest.CatchUp(t, d.a)
		if p := d.pending(t, id); len(p) != 0 {
			t.Fatalf("jobs after resolution: %v", p)
		}
		d.clock.Advance(10 * time.Hour)
		if res := d.tick(t); res.Claimed != 0 {
			t.Fatalf("ran jobs after resolution: %+v", res)
		}
	})
}

// TestDueJobCancellationRace: a reminder whose inquiry is resolved while the job runs (between its
// re-read and its append) appends nothing: no reminder after resolution. On SQLite and Postgres.
func TestDueJobCancellationRace(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		id := apptest.Intake(t, d.a, d.tenant, "k1")
		target := commands.Target{Tenant: d.tenant, InquiryID: id, Actor: d.op}
		if _, err := d.a.Commands.Claim(t.Context(), commands.Claim{Target: target}); err != nil {
			t.Fatal(err)
		}
		fu, err := d.a.Commands.ScheduleFollowUp(t.Context(), commands.ScheduleFollowUp{Target: target, In: time.Hour, Note: "call back"})
		if err != nil {
			t.Fatal(err)
		}
		apptest.CatchUp(t, d.a)
		d.clock.Advance(time.Hour)
		raced := 0
		app.SetDueDecided(d.a, func(j duejobs.Job) {
			if raced++; raced == 1 {
				apptest.Transition(t, d.a, d.op, id, domain.StatusResolved, "")
			}
		})
		res := d.tick(t)
		if res.Claimed != 1 || res.MovedOn != 1 || res.Fired != 0 {
			t.Fatalf("tick: %+v", res)
		}
		if slices.Contains(d.types(t, id), "FollowUpDue") {
			t.Fatalf("a reminder was appended after the resolution: %v", d.types(t, id))
		}
		j, err := d.a.DueJobs.Get(t.Context(), d.tenant, fu.JobID)
		if err != nil || j.State != duejobs.StateDone || j.Outcome != duejobs.OutcomeMovedOn {
			t.Fatalf("job %+v %v", j, err)
		}
	})
}

// TestFollowUpFiresOnce: a reminder set through the command fires once at its time, naming its
// recipients; running its job again (a claim that expired after the append) appends nothing more.
func TestFollowUpFiresOnce(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		id := apptest.Intake(t, d.a, d.tenant, "k1")
		target := commands.Target{Tenant: d.tenant, InquiryID: id, Actor: d.op, IdempotencyKey: "fu-1"}
		fu, err := d.a.Commands.ScheduleFollowUp(t.Context(), commands.ScheduleFollowUp{Target: target, In: 2 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		again, err := d.a.Commands.ScheduleFollowUp(t.Context(), commands.ScheduleFollowUp{Target: target, In: 2 * time.Hour})
		if err != nil || again.JobID != fu.JobID || !again.Replayed || !again.DueAt.Equal(fu.DueAt) {
			t.Fatalf("retried request: %+v %v (first %+v)", again, err, fu)
		}
		d.clock.Advance(2*time.Hour - time.Second)
		if res := d.tick(t); res.Claimed != 0 {
			t.Fatalf("fired early: %+v", res)
		}
		d.clock.Advance(time.Second)
		if res := d.tick(t); res.Fired != 1 {
			t.Fatalf("tick: %+v", res)
		}
		j, _ := d.a.DueJobs.Get(t.Context(), d.tenant, fu.JobID)
		second, err := d.a.Commands.FireDue(t.Context(), commands.FireDue{Target: commands.Target{Tenant: d.tenant, InquiryID: id}, Job: j.DueJob()})
		if err != nil || !second.Fired || !second.Replayed {
			t.Fatalf("second run: %+v %v", second, err)
		}
		if diff := cmp.Diff([]string{"InquiryReceived", "FollowUpScheduled", "FollowUpDue"}, d.types(t, id)); diff != "" {
			t.Fatalf("events: %s", diff)
		}
		recs, _ := d.a.Store.ReadStream(t.Context(), eventstore.InquiryStream(d.tenant, id), 2, 1)
		var due domain.FollowUpDue
		if err := json.Unmarshal(recs[0].Data, &due); err != nil || !slices.Equal(due.Recipients, []domain.PrincipalID{d.op.ID}) {
			t.Fatalf("recipients %v %v", due.Recipients, err)
		}
	})
}

// TestSLAClockReplays: rebuilding the schedules projection from the log gives the same clock (due
// times, breaches, first responses), though the policy changed after the inquiries arrived.
func TestSLAClockReplays(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		d.setPolicy(t, duePolicy)
		id1 := apptest.Intake(t, d.a, d.tenant, "k1")
		apptest.CatchUp(t, d.a)
		d.clock.Advance(61 * time.Minute)
		d.tick(t)
		d.tick(t)
		d.setPolicy(t, `{"time_zone":"Europe/Berlin","business_hours":{"mon":["09:00","17:00"]},"targets":{"normal":{"first_response":"3h"}}}`)
		id2 := apptest.Intake(t, d.a, d.tenant, "k2")
		apptest.Transition(t, d.a, d.op, id1, domain.StatusTriaged, domain.PriorityNormal)
		apptest.CatchUp(t, d.a)
		query := `SELECT inquiry_id || '|' || coalesce(first_response_due_at, 0) || '|' || coalesce(resolution_due_at, 0) || '|' ||
				coalesce(first_responded_at, 0) || '|' || breached_targets || '|' || escalation_level FROM sla_clock ORDER BY inquiry_id`
		before := dbtest.Strings(t, d.a.DB, query)
		if len(before) != 2 {
			t.Fatalf("clock rows %v", before)
		}
		res, err := projections.Rebuild(t.Context(), d.a.Store, d.a.DB, d.a.Schedules().Projection, projections.RebuildOptions{Logger: slog.New(slog.DiscardHandler), Now: d.clock.Now})
		if err != nil || !res.Switched {
			t.Fatalf("rebuild %+v %v", res, err)
		}
		if diff := cmp.Diff(before, dbtest.Strings(t, d.a.DB, query)); diff != "" {
			t.Fatalf("rebuilt clock differs: %s", diff)
		}
		// The second inquiry is measured by the Berlin policy: Monday 11:01 CET + 3 business hours.
		row := dbtest.Strings(t, d.a.DB, `SELECT coalesce(first_response_due_at, 0) || '' FROM sla_clock WHERE inquiry_id = ?`, string(id2))
		want := time.Date(2026, 11, 2, 14, 1, 0, 0, time.FixedZone("CET", 3600)).UnixNano()
		if len(row) != 1 || row[0] != strconv.FormatInt(want, 10) {
			t.Fatalf("second inquiry due %v, want %d", row, want)
		}
	})
}

// TestDueAlertRulesNameExportedMetrics: every metric the alert rules file uses is on /metrics, and
// the rules cover overdue unclaimed jobs, expired claims, repeated failures and the dead letter.
func TestDueAlertRulesNameExportedMetrics(t *testing.T) {
	t.Parallel()
	d := dueSetup(t, apptest.Backends[0])
	rules, err := os.ReadFile("../ops/prometheus/due-jobs.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics := rec.Body.String()
	used := regexp.MustCompile(`casebook_due_[a-z_]+`).FindAllString(string(rules), -1)
	for _, m := range used {
		if !strings.Contains(metrics, "\n"+m+" ") && !strings.Contains(metrics, "\n"+m+"{") {
			t.Errorf("the rules use %s, which /metrics does not export", m)
		}
	}
	for _, m := range []string{"casebook_due_jobs_overdue_unclaimed", "casebook_due_jobs_expired_claims", "casebook_due_jobs_repeated_failures", "casebook_due_jobs_dead"} {
		if !strings.Contains(string(rules), "expr: max("+m+")") {
			t.Errorf("no alert on %s", m)
		}
	}
}

// TestStatsSLAFigures: /v1/stats's SLA figures count breaches and take the median and 90th
// percentile of business time to first response and to resolution (waiting excluded), over the
// inquiries received in the range. On SQLite and Postgres.
func TestStatsSLAFigures(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		d.setPolicy(t, `{"time_zone":"UTC","targets":{"normal":{"first_response":"1h","resolution":"4h"}}}`)
		ids := []domain.InquiryID{apptest.Intake(t, d.a, d.tenant, "k1"), apptest.Intake(t, d.a, d.tenant, "k2"), apptest.Intake(t, d.a, d.tenant, "k3")}
		// First responses after 10m, 20m and 90m (the third breaches its target).
		for i, after := range []time.Duration{10 * time.Minute, 10 * time.Minute, 70 * time.Minute} {
			d.clock.Advance(after)
			if i == 2 {
				d.tick(t) // the first-response breach of the third
			}
			apptest.Transition(t, d.a, d.op, ids[i], domain.StatusTriaged, domain.PriorityNormal)
		}
		// The first is resolved at 2h with 30 minutes of waiting: 1h30m of resolution time.
		apptest.Transition(t, d.a, d.op, ids[0], domain.StatusInProgress, "")
		apptest.Transition(t, d.a, d.op, ids[0], domain.StatusWaiting, "")
		d.clock.Advance(30 * time.Minute)
		apptest.Transition(t, d.a, d.op, ids[0], domain.StatusResolved, "")
		apptest.CatchUp(t, d.a)
		st, err := d.a.Reader.Stats(t.Context(), d.tenant, dueT0, dueT0)
		if err != nil {
			t.Fatal(err)
		}
		f := func(v float64) *float64 { return &v }
		want := queries.SLAStats{Breached: 1, BreachedFirstResponse: 1,
			FirstResponse: queries.Durations{Count: 3, MedianSeconds: f(20 * 60), P90Seconds: f(90 * 60)},
			Resolution:    queries.Durations{Count: 1, MedianSeconds: f(90 * 60), P90Seconds: f(90 * 60)}}
		if diff := cmp.Diff(want, st.SLA); diff != "" {
			t.Fatalf("sla stats: %s", diff)
		}
	})
}

// TestTwoReplicasTickOnePostgres: two Casebook replicas on one Postgres database tick at the same
// time over 200 due follow-ups; each fires exactly once, and both replicas ran some.
func TestTwoReplicasTickOnePostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	clock := apptest.NewClock(dueT0)
	open := func() *app.App {
		return apptest.Open(t, app.Config{DatabaseURL: url, Now: clock.Now, DueTick: -1, Logger: slog.New(slog.DiscardHandler)})
	}
	a1, a2 := open(), open()
	ten, _, _, err := a1.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := a1.Tenancy.CreatePrincipal(t.Context(), "acme", "Olga", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		id := apptest.Intake(t, a1, ten.ID, fmt.Sprint("k", i))
		for range 10 {
			if _, err := a1.Commands.ScheduleFollowUp(t.Context(), commands.ScheduleFollowUp{
				Target: commands.Target{Tenant: ten.ID, InquiryID: id, Actor: op}, In: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
	}
	apptest.CatchUp(t, a1)
	clock.Advance(time.Hour)
	a1.Ticker.Batch, a2.Ticker.Batch = 10, 10
	var fired [2]int
	var wg sync.WaitGroup
	for i, a := range []*app.App{a1, a2} {
		wg.Go(func() {
			for {
				res, err := a.Ticker.Tick(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				if res.Claimed == 0 {
					return
				}
				fired[i] += res.Fired
			}
		})
	}
	wg.Wait()
	if fired[0]+fired[1] != 200 || fired[0] == 0 || fired[1] == 0 {
		t.Fatalf("replicas fired %v, want 200 in all, some on each", fired)
	}
	recs, err := a1.Store.ReadAll(t.Context(), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]int{}
	for _, r := range recs {
		if r.Type == "FollowUpDue" {
			var e domain.FollowUpDue
			if err := json.Unmarshal(r.Data, &e); err != nil {
				t.Fatal(err)
			}
			jobs[e.JobID]++
		}
	}
	for id, n := range jobs {
		if n != 1 {
			t.Errorf("job %s fired %d times", id, n)
		}
	}
	if len(jobs) != 200 {
		t.Fatalf("%d distinct follow-ups fired, want 200", len(jobs))
	}
}

// TestArchiveCancelsDueJobs: archiving ends the inquiry's pending follow-up (a new generation), and
// a tick after its due time fires nothing; the archived inquiry leaves the default list and shows
// with archived=true; unarchiving restores no reminder (the operator schedules anew). SQLite and
// Postgres.
func TestArchiveCancelsDueJobs(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		ctx := t.Context()
		id := apptest.Intake(t, d.a, d.tenant, "k1")
		target := commands.Target{Tenant: d.tenant, InquiryID: id, Actor: d.op}
		fu, err := d.a.Commands.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: target, In: 2 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		apptest.CatchUp(t, d.a)
		if j, err := d.a.DueJobs.Get(ctx, d.tenant, fu.JobID); err != nil || j.State != duejobs.StatePending {
			t.Fatalf("job before archive = %+v %v", j, err)
		}
		if _, err := d.a.Commands.Archive(ctx, commands.Archive{Target: target, Reason: "answered by phone"}); err != nil {
			t.Fatal(err)
		}
		apptest.CatchUp(t, d.a)
		if j, err := d.a.DueJobs.Get(ctx, d.tenant, fu.JobID); err != nil || j.State != duejobs.StateCancelled {
			t.Fatalf("job after archive = %+v %v", j, err)
		}
		d.clock.Advance(3 * time.Hour)
		if res := d.tick(t); res.Claimed != 0 || res.Fired != 0 {
			t.Fatalf("tick after archive: %+v", res)
		}
		list, _, err := d.a.Reader.List(ctx, d.tenant, queries.Filter{})
		if err != nil || len(list) != 0 {
			t.Fatalf("default list = %v %v", list, err)
		}
		yes := true
		list, _, err = d.a.Reader.List(ctx, d.tenant, queries.Filter{Archived: &yes})
		if err != nil || len(list) != 1 || !list[0].Archived {
			t.Fatalf("archived list = %v %v", list, err)
		}
		if _, err := d.a.Commands.AddNote(ctx, commands.AddNote{Target: target, Body: "x"}); !errors.Is(err, domain.ErrArchived) {
			t.Fatalf("note on archived = %v", err)
		}
		if _, err := d.a.Commands.Unarchive(ctx, commands.Unarchive{Target: target}); err != nil {
			t.Fatal(err)
		}
		apptest.CatchUp(t, d.a)
		if diff := cmp.Diff([]string{"InquiryReceived", "FollowUpScheduled", "InquiryArchived", "InquiryUnarchived"}, d.types(t, id)); diff != "" {
			t.Fatalf("events: %s", diff)
		}
		list, _, err = d.a.Reader.List(ctx, d.tenant, queries.Filter{})
		if err != nil || len(list) != 1 || list[0].Archived {
			t.Fatalf("list after unarchive = %v %v", list, err)
		}
	})
}
