package lists_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/domain"
)

const opsChannel = "C0OPS000001"

func createReq(b *bundle) lists.CreateRequest {
	return lists.CreateRequest{Tenant: b.tenant, Name: "Acme inquiries", Clearance: "internal", Channel: opsChannel,
		Viewers: []string{"U0VIEWER001", "U0VIEWER002"}, Owner: "U0OWNER0001"}
}

// TestCreateList: lists create makes a List with Casebook's keyed columns (slackLists.create),
// grants the channel and the viewers read access and the owner ownership (slackLists.access.set),
// records each grant (Slack cannot read them back), and activates it with the probe; the next
// intake gets its row there.
func TestCreateList(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.fake.AddChannel(opsChannel)
		res, err := b.app.Lists.Store.Create(t.Context(), createReq(b))
		if err != nil {
			t.Fatal(err)
		}
		li, ok := b.fake.List(res.List)
		if !ok || li.Name != "Acme inquiries" {
			t.Fatalf("List %s in Slack: %+v, %v", res.List, li, ok)
		}
		for _, key := range []string{lists.ColMarker, lists.ColReceipt, lists.ColStatus, lists.ColPriority, lists.ColTeam} {
			if li.ColumnID(key) == "" {
				t.Errorf("column %q missing from the created List", key)
			}
		}
		want := map[string]string{opsChannel: "read", "U0VIEWER001": "read", "U0VIEWER002": "read", "U0OWNER0001": "owner", b.fake.BotUserID(): "write"}
		if got := b.fake.ListAccess(res.List); !maps.Equal(got, want) {
			t.Fatalf("access in Slack = %v, want %v", got, want)
		}
		if res.Config.State != lists.StateActive || res.Access.Owner != "U0OWNER0001" || len(res.Access.Grants) != 4 {
			t.Fatalf("result = %+v", res)
		}
		sts, err := b.app.Lists.Store.Statuses(t.Context(), b.tenant)
		if err != nil || len(sts) != 1 || sts[0].Access == nil || sts[0].Access.Owner != "U0OWNER0001" || len(sts[0].Access.Grants) != 4 {
			t.Fatalf("status = %+v, %v", sts, err)
		}
		ev := events(t, b, lists.ProjectionStream(b.tenant, res.List))
		wantEv := []string{"ListCreated", "ListAccessGranted", "ListAccessGranted", "ListAccessGranted", "ListAccessGranted", "ListProjectionActivated"}
		if len(ev) != len(wantEv) {
			t.Fatalf("events = %v, want %v", ev, wantEv)
		}
		for i := range ev {
			if ev[i] != wantEv[i] {
				t.Fatalf("events = %v, want %v", ev, wantEv)
			}
		}
		if n := len(b.fake.Rows(res.List)); n != 0 {
			t.Fatalf("%d probe rows left", n)
		}
		b.intake(t, "k1")
		b.project(t)
		noErrors(t, b.work(t))
		if rows := b.fake.Rows(res.List); len(rows) != 1 {
			t.Fatalf("%d rows after an intake, want 1", len(rows))
		}
	})
}

// TestCreateListFailureCleanup: once the List exists, a failed grant or a failed probe leaves its
// projection registered and disabled (no row, no Slack I/O for inquiries), names the List and what
// was granted, and the probe's own row is removed; bad input is refused before any Slack call.
func TestCreateListFailureCleanup(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, method, step string
		fault              fakeslack.Fault
		after              int // calls of method that succeed first
		granted            int
	}{
		{"grant refused", "slackLists.access.set", "access", fakeslack.SlackError(fakeslack.CodeRestrictedAction), 1, 1},
		{"probe update refused", "slackLists.items.update", lists.StepUpdate, fakeslack.SlackError(fakeslack.CodeInvalidOptionID), 0, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, backends[0].Config(t))
			b.fake.AddChannel(opsChannel)
			b.fake.AddRule(fakeslack.Rule{Method: tc.method, Fault: tc.fault, After: tc.after, Times: 1})
			_, err := b.app.Lists.Store.Create(t.Context(), createReq(b))
			var ce *lists.CreateError
			if !errors.As(err, &ce) || ce.Step != tc.step || ce.List == "" || len(ce.Granted) != tc.granted {
				t.Fatalf("err = %v, want a CreateError at %s after %d grants", err, tc.step, tc.granted)
			}
			c, err := b.app.Lists.Store.Config(t.Context(), b.tenant, ce.List)
			if err != nil || c.State != lists.StateDisabled || c.LastProbeError == "" || c.Access == nil || len(c.Access.Grants) != tc.granted {
				t.Fatalf("config = %+v, %v", c, err)
			}
			if n := len(b.fake.Rows(ce.List)); n != 0 {
				t.Fatalf("%d probe rows left", n)
			}
			before := b.listCalls()
			b.intake(t, "k1")
			b.project(t)
			b.work(t)
			if b.listCalls() != before || len(b.fake.Rows(ce.List)) != 0 {
				t.Fatal("a disabled List got Slack I/O")
			}
		})
	}
	t.Run("bad input", func(t *testing.T) {
		t.Parallel()
		b := setup(t, backends[0].Config(t))
		bad := []func(r *lists.CreateRequest){
			func(r *lists.CreateRequest) { r.Name = " " },
			func(r *lists.CreateRequest) { r.Name = "two\nlines" },
			func(r *lists.CreateRequest) { r.Clearance = "secret" },
			func(r *lists.CreateRequest) { r.Channel = "#ops" },
			func(r *lists.CreateRequest) { r.Viewers = []string{"alice"} },
			func(r *lists.CreateRequest) { r.Owner = "bob@example.com" },
			func(r *lists.CreateRequest) { r.Owner = "U0VIEWER001" },
		}
		for i, mut := range bad {
			r := createReq(b)
			mut(&r)
			if _, err := b.app.Lists.Store.Create(t.Context(), r); !errors.Is(err, domain.ErrValidation) {
				t.Errorf("case %d: err = %v, want invalid", i, err)
			}
		}
		if n := b.fake.CallCount("slackLists.create"); n != 0 {
			t.Fatalf("slackLists.create called %d times for bad input", n)
		}
	})
}
