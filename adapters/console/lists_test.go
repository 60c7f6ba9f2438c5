package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app/apptest"
)

// TestAdminListsShowReconcile: the admin page's Slack Lists section shows each List's activation,
// schema health, watermarks and its last reconcile's outcome counts, to the tenant's admin only.
func TestAdminListsShowReconcile(t *testing.T) {
	t.Parallel()
	for _, b := range apptest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, b.Config(t))
			ctx := t.Context()
			fake := fakeslack.NewTestServer(t, fakeslack.Options{})
			if _, err := tb.app.Slack.Install(ctx, slackinstall.InstallRequest{Tenant: tb.acme, Token: fake.Token(), SigningSecret: "sig",
				AppID: "A0FAKEAPP01", APIURL: fake.URL()}); err != nil {
				t.Fatal(err)
			}
			li, err := fake.CreateList("Inquiries", apptest.BoardColumns()...)
			if err != nil {
				t.Fatal(err)
			}
			section := func(body string) string {
				_, after, _ := strings.Cut(body, `aria-label="Slack Lists"`)
				s, _, _ := strings.Cut(after, "</section>")
				return s
			}
			c := tb.client(t)
			c.signIn(tb.admin)
			if _, err := tb.app.Lists.Store.Activate(ctx, lists.ActivateRequest{Tenant: tb.acme, List: li.ID, Clearance: "internal", RemoveAfter: time.Hour}); err != nil {
				t.Fatal(err)
			}
			p := c.get("/console/admin")
			if s := section(p.body); p.status != http.StatusOK || !strings.Contains(s, li.ID) || !strings.Contains(s, "never run") {
				t.Fatalf("before a sweep: %d %s", p.status, s)
			}
			tb.intake(t, tb.acme, "k1")
			tb.intake(t, tb.acme, "k2")
			r := tb.app.Lists.Reconciler
			r.Budget.ReadEvery = -1
			if _, err := r.Run(ctx, tb.acme, li.ID, false); err != nil {
				t.Fatal(err)
			}
			if err := fake.DeleteRow(li.ID, fake.Rows(li.ID)[0].ID); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx, tb.acme, li.ID, false); err != nil {
				t.Fatal(err)
			}
			s := section(c.get("/console/admin").body)
			for _, want := range []string{"<td>" + li.ID + "</td>", "<td>active</td>", "<td>ok</td>", "complete: in_sync 1, missing_once 1"} {
				if !strings.Contains(s, want) {
					t.Errorf("the Lists section lacks %q:\n%s", want, s)
				}
			}
			if n := len(regexp.MustCompile(`<td>\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC</td>`).FindAllString(s, -1)); n != 2 {
				t.Errorf("%d watermark times in the Lists section, want last observed and last fully applied:\n%s", n, s)
			}
			if strings.Contains(s, "never run") {
				t.Errorf("the Lists section still says never run:\n%s", s)
			}
			other := tb.client(t)
			other.signIn(tb.other)
			if s := section(other.get("/console/admin").body); strings.Contains(s, li.ID) {
				t.Errorf("another tenant's admin sees the List:\n%s", s)
			}
		})
	}
}
