package app_test

import (
	"testing"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// TestRedeliveryOfAnErasedIntakeRecordsNothing: an intake redelivered after its inquiry was erased
// finds the erased inquiry through its claim and is answered with the first receipt; nothing is
// appended, so the personal data it carries is not recorded again.
func TestRedeliveryOfAnErasedIntakeRecordsNothing(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		a := apptest.Open(t, cfg)
		ctx := t.Context()
		tenant, admin, _ := apptest.TenantWithOperator(t, a, "acme")
		id := apptest.Intake(t, a, tenant, "erase-me")
		_, receipt, err := a.Commands.FindIntake(ctx, tenant, domain.SourcePublicForm, "erase-me")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Commands.Erase(ctx, commands.Erase{Target: commands.Target{Tenant: tenant, InquiryID: id, Actor: admin}, Policy: "request"}); err != nil {
			t.Fatal(err)
		}
		before := apptest.LogLen(t, a)
		res, err := a.Commands.Intake(ctx, commands.Intake{Tenant: tenant, Source: domain.SourcePublicForm, IdempotencyKey: "erase-me",
			Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"}, Subject: "Invoice twice",
			Message: "Invoice 42 charges me twice.", Category: "billing"})
		if err != nil || res.InquiryID != id || !res.Replayed || res.Receipt != receipt {
			t.Fatalf("redelivery after erasure: %+v %v, want %s replayed with %s", res, err, id, receipt)
		}
		if n := apptest.LogLen(t, a); n != before {
			t.Fatalf("the redelivery appended %d events", n-before)
		}
	})
}
