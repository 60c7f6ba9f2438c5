package scenarios

import (
	"fmt"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// TestSlackListScenario: the real binary with the fake Slack: activate a List (the probe leaves no
// row), intake → one row, transitions update it, resolution removes it after the delay.
func TestSlackListScenario(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Clock: fakeslack.SystemClock()})
	var st []string
	for _, s := range domain.Statuses {
		st = append(st, string(s))
	}
	li, err := fake.CreateList("Inquiries",
		fakeslack.Column{Key: lists.ColReceipt, Type: "text", Primary: true},
		fakeslack.Column{Key: lists.ColMarker, Type: "text"},
		fakeslack.Column{Key: lists.ColStatus, Type: "select", Choices: st},
		fakeslack.Column{Key: lists.ColPriority, Type: "select", Choices: []string{"low", "normal", "high", "urgent"}},
		fakeslack.Column{Key: lists.ColTeam, Type: "text"})
	if err != nil {
		t.Fatal(err)
	}
	op := slackTenantWithOperator(t, dir, fake, "s")
	var cfg map[string]any
	cli(t, dir, &cfg, "lists", "activate", "--tenant", "acme", "--list", li.ID, "--clearance", "internal", "--remove-after", "2s")
	if cfg["state"] != "active" || len(fake.Rows(li.ID)) != 0 {
		t.Fatalf("activate = %v, rows %d", cfg, len(fake.Rows(li.ID)))
	}
	var status []map[string]any
	cli(t, dir, &status, "lists", "status", "--tenant", "acme")
	if len(status) != 1 || status[0]["activation"] != "active" || status[0]["schema"] != "ok" {
		t.Fatalf("status = %v", status)
	}
	srv := start(t, dir)

	code, _, err := srv.do("POST", "/v1/public/acme/inquiries", "", "form-1",
		adaIntake)
	if err != nil || code != 202 {
		t.Fatalf("intake = %d %v", code, err)
	}
	statusCol := li.ColumnID(lists.ColStatus)
	rowStatus := func(want string) func() bool { return rowStatusIs(fake, li.ID, statusCol, want) }
	eventually(t, "the row", rowStatus("new"))
	id := firstInquiryID(t, srv, op.Token)
	for v, body := range []string{`{"to":"triaged","priority":"high"}`, `{"to":"in_progress"}`} {
		req := fmt.Sprintf("/v1/inquiries/%s/transitions", id)
		if code, res, err := srv.doIfMatch("POST", req, op.Token, fmt.Sprint(v+1), body); err != nil || code != 200 {
			t.Fatalf("transition = %d %v %v", code, res, err)
		}
	}
	eventually(t, "the row in progress", rowStatus("in_progress"))
	if code, res, err := srv.doIfMatch("POST", "/v1/inquiries/"+id+"/transitions", op.Token, "3", `{"to":"resolved"}`); err != nil || code != 200 {
		t.Fatalf("resolve = %d %v %v", code, res, err)
	}
	eventually(t, "the row removed after the delay", func() bool { return len(fake.Rows(li.ID)) == 0 })
	if n := fake.CallCount("slackLists.items.create"); n != 2 {
		t.Fatalf("%d creates, want the probe's and the inquiry's", n)
	}
	kinds := streamsRegisteredIn(t, dir)
	for _, k := range []eventstore.StreamKind{eventstore.KindInquiry, eventstore.KindSlackList, eventstore.KindListProjection, eventstore.KindInstallation} {
		if !kinds[k] {
			t.Errorf("no %s stream in the log: the scenario no longer exercises it", k)
		}
	}
}
