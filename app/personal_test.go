package app_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// personalSecrets are written in every personal member; none is a substring of anything else.
var personalSecrets = []string{"Quillon Marsh", "q.marsh.4471@example.org", "Subject-Teal-9913", "Message-Ivory-2208",
	"ext-Cobalt-6620", "Note-Amber-3391", "FollowUp-Jade-5127", "Legacy-Rust-8034"}

// personalLog writes inquiries with every personal member set (an intake with an external id, a
// note, a follow-up with a note, transitions, an SLA breach, an erasure, and an intake written
// before sealing: straight to the backend, in clear) and waits until every subscriber applied them.
func personalLog(t *testing.T, d dueBundle) {
	t.Helper()
	ctx := t.Context()
	d.setPolicy(t, `{"time_zone":"UTC","targets":{"normal":{"first_response":"1h","resolution":"4h"}}}`)
	s := personalSecrets
	res, err := d.a.Commands.Intake(ctx, commands.Intake{Tenant: d.tenant, Source: domain.SourceAPI, IdempotencyKey: "p1", Submitter: &d.admin,
		ExternalID: s[4], Requester: domain.Requester{Name: s[0], Email: s[1]}, Subject: s[2], Message: s[3], Category: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	target := commands.Target{Tenant: d.tenant, InquiryID: res.InquiryID, Actor: d.op}
	if _, err := d.a.Commands.AddNote(ctx, commands.AddNote{Target: target, Body: s[5]}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.a.Commands.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: target, In: 2 * time.Hour, Note: s[6]}); err != nil {
		t.Fatal(err)
	}
	erased := apptest.Intake(t, d.a, d.tenant, "p2")
	apptest.Transition(t, d.a, d.op, res.InquiryID, domain.StatusTriaged, domain.PriorityHigh)
	d.clock.Advance(90 * time.Minute)
	d.tick(t) // the second inquiry breaches its first response
	if _, err := d.a.Commands.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: d.tenant, InquiryID: erased, Actor: d.admin}, Policy: "request"}); err != nil {
		t.Fatal(err)
	}
	var raw eventstore.Store
	if d.a.DB.Dialect == sqldb.Postgres {
		raw, err = postgres.New(ctx, d.a.DB.PgxPool(), postgres.Options{})
	} else {
		raw, err = sqlite.New(ctx, d.a.DB, sqlite.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	legacy := *d.a.Commands
	legacy.Store, legacy.Keys = raw, nil
	if _, err := legacy.Intake(ctx, commands.Intake{Tenant: d.tenant, Source: domain.SourcePublicForm, IdempotencyKey: "old",
		Requester: domain.Requester{Name: s[7], Email: "legacy@example.org"}, Subject: s[7], Message: s[7]}); err != nil {
		t.Fatal(err)
	}
	apptest.CatchUp(t, d.a)
}

// recorder stands in for a projection: it declares what declared declares, keeps every event it is
// given, and writes nothing.
type recorder struct {
	declared projections.Projection
	mu       sync.Mutex
	data     []string
}

func (r *recorder) Name() string     { return "recorder_" + r.declared.Name() }
func (r *recorder) Version() int     { return 1 }
func (r *recorder) Tables() []string { return nil }
func (r *recorder) Setup(context.Context, *sqldb.DB, projections.Generation) error {
	return nil
}
func (r *recorder) ReadsPersonalData() bool { return projections.ReadsPersonalData(r.declared) }

// selecting is a recorder of a projection that names the events it needs opened.
type selecting struct{ *recorder }

func (r selecting) NeedsPersonalData(e eventstore.RecordedEvent) bool {
	return r.declared.(projections.PersonalSelector).NeedsPersonalData(e)
}
func (r *recorder) Apply(_ context.Context, b *projections.Batch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range b.Events {
		r.data = append(r.data, string(e.Data))
	}
	return nil
}

// TestPersonalDataOnlyToProjectionsThatReadIt: every subscriber declares whether it reads personal
// members, and only the query model, the portal index and the privacy index do. A subscriber
// declared like one of the others is handed events in which no personal member is readable (not
// the sealed ones, nor one written before sealing), while one declared like the query model reads
// them all. One declared like the portal or the privacy index reads those of the events it names
// and no other. SQLite and Postgres.
func TestPersonalDataOnlyToProjectionsThatReadIt(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		var readers, others []string
		for _, r := range d.a.Runners {
			if _, ok := r.Projection.(projections.PersonalReader); !ok {
				t.Errorf("projection %s does not declare whether it reads personal data", r.Projection.Name())
			}
			if projections.ReadsPersonalData(r.Projection) {
				readers = append(readers, r.Projection.Name())
			} else {
				others = append(others, r.Projection.Name())
			}
		}
		slices.Sort(readers)
		slices.Sort(others)
		if want := []string{"portal", "privacy", "querymodel"}; !slices.Equal(readers, want) {
			t.Errorf("projections reading personal data: %v, want %v", readers, want)
		}
		if want := []string{"listintents", "listrowmap", "schedules", "slackdueintents", "slackintents"}; !slices.Equal(others, want) {
			t.Errorf("projections reading no personal data: %v, want %v", others, want)
		}

		personalLog(t, d)
		head, err := d.a.Store.Head(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, r := range d.a.Runners {
			rec := &recorder{declared: r.Projection}
			var p projections.Projection = rec
			if _, ok := r.Projection.(projections.PersonalSelector); ok {
				p = selecting{rec}
			}
			run := &projections.Runner{Store: d.a.Store, DB: d.a.DB, Projection: p, Logger: slog.New(slog.DiscardHandler), Now: d.clock.Now}
			if err := run.Setup(t.Context()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- run.Run(ctx) }()
			err := run.WaitFor(t.Context(), head)
			cancel()
			if stopped := <-done; stopped != nil && !errors.Is(stopped, context.Canceled) {
				t.Fatal(stopped)
			}
			if err != nil {
				t.Fatal(err)
			}
			seen[r.Projection.Name()] = strings.Join(rec.data, "\n")
		}
		// Those that name the events they need opened see the personal members of those only. The
		// portal index opens the submitter's intake (name, address, subject, message, customer id),
		// not the notes nor the intakes without a submitter; the privacy index opens the intakes,
		// the one written before sealing included, and no note.
		selected := map[string][]int{"portal": {0, 1, 2, 3, 4}, "privacy": {0, 1, 2, 3, 4, 7}}
		for name, data := range seen {
			_, selects := selected[name]
			if sealed := strings.Contains(data, `"sealed"`); sealed == (slices.Contains(readers, name) && !selects) {
				t.Errorf("%s saw a sealed member: %v", name, sealed)
			}
			for i, s := range personalSecrets {
				shown := strings.Contains(data, s)
				if selects {
					if shown != slices.Contains(selected[name], i) {
						t.Errorf("%s, which opens the events it names only, saw %q: %v", name, s, shown)
					}
					continue
				}
				if slices.Contains(readers, name) && !shown {
					t.Errorf("%s, which reads personal data, did not see %q", name, s)
				}
				if !slices.Contains(readers, name) && shown {
					t.Errorf("%s, which reads no personal data, was handed %q", name, s)
				}
			}
		}
		if q := seen["querymodel"]; !strings.Contains(q, personalSecrets[0]) || !strings.Contains(q, domain.Erased) {
			t.Errorf("the query model did not read opened and erased members")
		}
	})
}

// tableRows lists every row of the projection's tables (the views of its served generation).
func tableRows(t *testing.T, a *app.App, p projections.Projection) []string {
	t.Helper()
	var out []string
	for _, base := range p.Tables() {
		rows, err := dumpTable(t.Context(), a.DB, base)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	slices.Sort(out)
	return out
}

// dumpTable renders each row of table as table|column=value|….
func dumpTable(ctx context.Context, db *sqldb.DB, table string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT * FROM `+table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := table
		for i, v := range vals {
			row += fmt.Sprintf("|%s=%s", cols[i], v)
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// opened hides the store's as-stored view, so that every projection reads opened events.
type opened struct{ eventstore.Store }

// TestProjectionsWithoutPersonalDataBuildTheSameRows: each subscriber that reads no personal data,
// or only that of the events it names (the portal and privacy indexes), builds exactly the same
// rows from the log as it reads it as from the opened log, and as it did live. SQLite and
// Postgres.
func TestProjectionsWithoutPersonalDataBuildTheSameRows(t *testing.T) {
	t.Parallel()
	eachDue(t, func(t *testing.T, d dueBundle) {
		personalLog(t, d)
		rebuild := func(store eventstore.Store, p projections.Projection) []string {
			res, err := projections.Rebuild(t.Context(), store, d.a.DB, p, projections.RebuildOptions{Logger: slog.New(slog.DiscardHandler), Now: d.clock.Now})
			if err != nil || !res.Switched {
				t.Fatalf("rebuild of %s = %+v, %v", p.Name(), res, err)
			}
			return tableRows(t, d.a, p)
		}
		checked := 0
		for _, r := range d.a.Runners {
			p := r.Projection
			if _, selects := p.(projections.PersonalSelector); projections.ReadsPersonalData(p) && !selects {
				continue
			}
			live := tableRows(t, d.a, p)
			fromOpened := rebuild(opened{d.a.Store}, p)
			fromStored := rebuild(d.a.Store, p)
			// listrowmap folds List row events, which need a List; listintents and slackdueintents
			// keep no table (their output is jobs, which a rebuild never emits).
			if len(fromStored) == 0 && p.Name() != "listrowmap" && p.Name() != "listintents" && p.Name() != "slackdueintents" {
				t.Errorf("%s: no rows to compare", p.Name())
			}
			if diff := cmp.Diff(fromOpened, fromStored); diff != "" {
				t.Errorf("%s built from the opened log and from the log as stored differ (-opened +stored):\n%s", p.Name(), diff)
			}
			if diff := cmp.Diff(live, fromStored); diff != "" {
				t.Errorf("%s live and rebuilt from the log as stored differ (-live +rebuilt):\n%s", p.Name(), diff)
			}
			checked++
		}
		if checked != 7 {
			t.Fatalf("compared %d projections, want 7", checked)
		}
	})
}
