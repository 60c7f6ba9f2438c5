package lists_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/slacktest"
)

type clock = apptest.Clock

type bundle struct {
	app    *app.App
	fake   *fakeslack.Server
	clock  *clock
	tenant domain.TenantID
	op     domain.Principal
	list   fakeslack.ListInfo
	worked map[int64]bool
}

var backends = apptest.Backends

func eachBackend(t *testing.T, fn func(t *testing.T, b *bundle)) {
	t.Helper()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) { fn(t, setup(t, cfg)) })
}

// boardColumns is a List fit for an internal-clearance projection.
func boardColumns() []fakeslack.Column { return apptest.BoardColumns() }

func setup(t *testing.T, cfg app.Config) *bundle {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	e := slacktest.New(t, cfg, slacktest.Options{})
	li, err := e.Fake.CreateList("Inquiries", boardColumns()...)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{app: e.App, fake: e.Fake, clock: e.Clock, tenant: e.Tenant, op: e.Operator, list: li, worked: map[int64]bool{}}
}

func (b *bundle) activate(t *testing.T) lists.Config {
	t.Helper()
	c, err := b.app.Lists.Store.Activate(t.Context(), lists.ActivateRequest{Tenant: b.tenant, List: b.list.ID, Clearance: "internal", RemoveAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (b *bundle) intake(t *testing.T, key string) domain.InquiryID {
	t.Helper()
	return apptest.Intake(t, b.app, b.tenant, key)
}

func (b *bundle) transition(t *testing.T, id domain.InquiryID, to domain.Status, priority domain.Priority) {
	t.Helper()
	apptest.Transition(t, b.app, b.op, id, to, priority)
}

func (b *bundle) project(t *testing.T) { t.Helper(); apptest.CatchUp(t, b.app) }

func (b *bundle) jobs(t *testing.T, kind string) []*rivertype.JobRow {
	t.Helper()
	return apptest.Jobs(t, b.app.Effects.Client(), kind)
}

func syncJobs(t *testing.T, b *bundle) []*rivertype.JobRow { return b.jobs(t, lists.SyncArgs{}.Kind()) }

func (b *bundle) workSync(ctx context.Context, t *testing.T, j *rivertype.JobRow) error {
	t.Helper()
	return b.app.Effects.WorkJob(ctx, j)
}

func (b *bundle) workRemove(ctx context.Context, t *testing.T, j *rivertype.JobRow) error {
	t.Helper()
	return b.app.Effects.WorkJob(ctx, j)
}

// work runs every sync job not worked yet, in order, and returns their errors.
func (b *bundle) work(t *testing.T) []error {
	t.Helper()
	var out []error
	for _, j := range syncJobs(t, b) {
		if b.worked[j.ID] {
			continue
		}
		b.worked[j.ID] = true
		out = append(out, b.workSync(t.Context(), t, j))
	}
	return out
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("work: %v", err)
		}
	}
}

// listCalls counts every slackLists.* call the fake saw.
func (b *bundle) listCalls() int {
	n := 0
	for m, c := range b.fake.CallCounts() {
		if len(m) > 11 && m[:11] == "slackLists." {
			n += c
		}
	}
	return n
}

func (b *bundle) rows() []fakeslack.Row { return b.fake.Rows(b.list.ID) }

func (b *bundle) col(key string) string { return b.list.ColumnID(key) }

func oneRow(t *testing.T, b *bundle) fakeslack.Row {
	t.Helper()
	rs := b.rows()
	if len(rs) != 1 {
		t.Fatalf("%d rows in the List, want exactly 1", len(rs))
	}
	return rs[0]
}
