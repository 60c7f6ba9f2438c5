package lists_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/domain"
)

func events(t *testing.T, b *bundle, stream string) []string {
	t.Helper()
	evs, err := b.app.Store.ReadStream(t.Context(), stream, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// TestActivationProbeSucceeds: the probe creates, updates, reads back and deletes its row, stores
// column ids, option values and a fingerprint, activates, and records the event.
func TestActivationProbeSucceeds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		c := b.activate(t)
		if c.State != lists.StateActive || c.SchemaState != lists.SchemaOK || c.Schema.Fingerprint == "" {
			t.Fatalf("config = %+v", c)
		}
		if got := c.Schema.Columns[lists.ColStatus]; got.ID != b.col(lists.ColStatus) || got.Options["in_progress"] != "in_progress" {
			t.Fatalf("status column = %+v", got)
		}
		if len(b.rows()) != 0 || len(b.fake.ArchivedRows(b.list.ID)) != 0 {
			t.Fatal("the probe row was left behind")
		}
		for _, m := range []string{"slackLists.items.create", "slackLists.items.update", "slackLists.items.info", "slackLists.items.delete"} {
			if b.fake.CallCount(m) != 1 {
				t.Fatalf("%s called %d times", m, b.fake.CallCount(m))
			}
		}
		if ev := events(t, b, lists.ProjectionStream(b.tenant, b.list.ID)); len(ev) != 1 || ev[0] != "ListProjectionActivated" {
			t.Fatalf("events = %v", ev)
		}
	})
}

// TestActivationFailsAtEachStepAndCleansUp: a failure at any probe step leaves no probe row, the
// projection disabled, and an event naming the step.
func TestActivationFailsAtEachStepAndCleansUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		step   string
		method string
		fault  fakeslack.Fault
	}{
		{lists.StepAccess, "slackLists.items.list", fakeslack.SlackError(fakeslack.CodeListNotFound)},
		{lists.StepCreate, "slackLists.items.create", fakeslack.SlackError(fakeslack.CodeInvalidColumnID)},
		{lists.StepCreate, "slackLists.items.create", fakeslack.DropAfterApply()},
		{lists.StepUpdate, "slackLists.items.update", fakeslack.SlackError(fakeslack.CodeInvalidOptionID)},
		{lists.StepReadBack, "slackLists.items.info", fakeslack.HTTPStatus(503)},
		{lists.StepDelete, "slackLists.items.delete", fakeslack.SlackError("internal_error")},
	}
	for _, tc := range cases {
		t.Run(tc.step+"/"+tc.fault.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, backends[0].Config(t))
			b.fake.FailNext(tc.method, tc.fault)
			_, err := b.app.Lists.Store.Activate(t.Context(), lists.ActivateRequest{Tenant: b.tenant, List: b.list.ID, Clearance: "internal"})
			var pe *lists.ProbeError
			if !errors.As(err, &pe) || pe.Step != tc.step || !pe.CleanedUp {
				t.Fatalf("err = %v, want a cleaned-up failure at %s", err, tc.step)
			}
			if n := len(b.rows()); n != 0 {
				t.Fatalf("%d probe rows left", n)
			}
			c, err := b.app.Lists.Store.Config(t.Context(), b.tenant, b.list.ID)
			if err != nil || c.State != lists.StateDisabled || c.LastProbeError == "" {
				t.Fatalf("config = %+v, %v", c, err)
			}
			if ev := events(t, b, lists.ProjectionStream(b.tenant, b.list.ID)); len(ev) != 1 || ev[0] != "ListActivationFailed" {
				t.Fatalf("events = %v", ev)
			}
		})
	}
	t.Run("schema", func(t *testing.T) {
		t.Parallel()
		b := setup(t, backends[0].Config(t))
		li, err := b.fake.CreateList("No marker", fakeslack.Column{Key: lists.ColReceipt, Type: "text"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.app.Lists.Store.Activate(t.Context(), lists.ActivateRequest{Tenant: b.tenant, List: li.ID, Clearance: "internal"})
		var pe *lists.ProbeError
		if !errors.As(err, &pe) || pe.Step != lists.StepSchema || !strings.Contains(err.Error(), lists.ColMarker) {
			t.Fatalf("err = %v", err)
		}
		if b.fake.CallCount("slackLists.items.create") != 0 {
			t.Fatal("a probe row was created for a List with a wrong schema")
		}
	})
}

// TestSchemaDriftFailsClosed: a removed column or a missing option is drift: recorded, visible in
// status, and jobs do no Slack I/O; a healthy check never clears the cooldown.
func TestSchemaDriftFailsClosed(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		b.activate(t)
		until := b.clock.Now().Add(time.Hour)
		cfg, err := b.app.Lists.Store.Config(ctx, b.tenant, b.list.ID)
		if err != nil {
			t.Fatal(err)
		}
		in, err := b.app.Slack.Installation(ctx, b.tenant, cfg.InstallationID)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.app.Effects.Guard.SetCooldown(ctx, b.tenant, in.Key, b.list.ID, until); err != nil {
			t.Fatal(err)
		}
		c, err := b.app.Lists.Store.CheckSchema(ctx, b.tenant, b.list.ID)
		if err != nil || c.SchemaState != lists.SchemaOK {
			t.Fatalf("healthy check = %+v, %v", c, err)
		}
		st, err := b.app.Lists.Store.Statuses(ctx, b.tenant)
		if err != nil || len(st) != 1 || st[0].CooldownUntil == nil || !st[0].CooldownUntil.Equal(until) {
			t.Fatalf("a healthy schema touched the cooldown: %+v %v", st, err)
		}
		if err := b.fake.SetChoices(b.list.ID, b.col(lists.ColStatus), "new", "triaged"); err != nil {
			t.Fatal(err)
		}
		c, err = b.app.Lists.Store.CheckSchema(ctx, b.tenant, b.list.ID)
		if err != nil || c.SchemaState != lists.SchemaDrifted || !strings.Contains(c.SchemaReason, "in_progress") {
			t.Fatalf("drift check = %+v, %v", c, err)
		}
		if ev := events(t, b, lists.ProjectionStream(b.tenant, b.list.ID)); ev[len(ev)-1] != "ListSchemaDrifted" {
			t.Fatalf("events = %v", ev)
		}
		if err := b.fake.RemoveColumn(b.list.ID, b.col(lists.ColMarker)); err != nil {
			t.Fatal(err)
		}
		if c, err = b.app.Lists.Store.CheckSchema(ctx, b.tenant, b.list.ID); err != nil || c.SchemaState != lists.SchemaDrifted {
			t.Fatalf("drift check = %+v, %v", c, err)
		}
		st, _ = b.app.Lists.Store.Statuses(ctx, b.tenant)
		if st[0].Activation != lists.StateActive || st[0].Schema != lists.SchemaDrifted {
			t.Fatalf("status = %+v", st[0])
		}
		before := b.listCalls()
		b.intake(t, "k1")
		b.project(t)
		for _, err := range b.work(t) {
			if err == nil || !strings.Contains(err.Error(), "Snooze") {
				t.Fatalf("a drifted List's job = %v, want a snooze", err)
			}
		}
		if b.listCalls() != before {
			t.Fatal("a drifted List got Slack calls")
		}
	})
}

// TestDisabledMakesZeroCalls: an installed tenant with a List that is not activated (or was
// deactivated) gets no job and no Slack call, whatever happens to its inquiries.
func TestDisabledMakesZeroCalls(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		id := b.intake(t, "k1")
		b.transition(t, id, domain.StatusTriaged, domain.PriorityHigh)
		b.project(t)
		noErrors(t, b.work(t))
		if n := len(syncJobs(t, b)); n != 0 || b.listCalls() != 0 {
			t.Fatalf("disabled: %d jobs, %d calls", n, b.listCalls())
		}
		b.activate(t)
		b.intake(t, "k2")
		b.project(t)
		noErrors(t, b.work(t))
		if len(b.rows()) != 1 {
			t.Fatalf("active: %d rows", len(b.rows()))
		}
		if _, err := b.app.Lists.Store.Deactivate(t.Context(), b.tenant, b.list.ID); err != nil {
			t.Fatal(err)
		}
		before := b.listCalls()
		b.transition(t, id, domain.StatusInProgress, "")
		b.intake(t, "k3")
		b.project(t)
		noErrors(t, b.work(t))
		if b.listCalls() != before {
			t.Fatalf("deactivated: %d Slack calls", b.listCalls()-before)
		}
		if ev := events(t, b, lists.ProjectionStream(b.tenant, b.list.ID)); ev[len(ev)-1] != "ListProjectionDeactivated" {
			t.Fatalf("events = %v", ev)
		}
	})
}
