package scenarios

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/reminders"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/httptestclient"
	"github.com/casebook/casebook/internal/slacktest"
)

// dueScenario is one in-process Casebook on SQLite with a hand-driven clock and ticker, the fake
// Slack, and the HTTP API on a loopback server.
type dueScenario struct {
	a      *app.App
	clock  *apptest.Clock
	fake   *fakeslack.Server
	srv    *httptest.Server
	worked map[int64]bool
}

func (d *dueScenario) call(t *testing.T, method, path, token, ifMatch, body string) (int, map[string]any) {
	t.Helper()
	r := httptestclient.Request{Method: method, Path: path, Token: token, Body: body}
	if ifMatch != "" {
		r.Header = map[string]string{"If-Match": `"` + ifMatch + `"`}
	}
	return httptestclient.Client{Base: d.srv.URL}.Call(t, r)
}

func (d *dueScenario) must(t *testing.T, want int, method, path, token, ifMatch, body string) map[string]any {
	t.Helper()
	code, m := d.call(t, method, path, token, ifMatch, body)
	if code != want {
		t.Fatalf("%s %s = %d %v, want %d", method, path, code, m, want)
	}
	return m
}

// slack projects the log and works every Slack job not worked yet (threads, reminders,
// escalations) until none is left, failing on any job error.
func (d *dueScenario) slack(t *testing.T) {
	t.Helper()
	for range 3 {
		apptest.CatchUp(t, d.a)
		for _, kind := range []string{threads.SyncArgs{}.Kind(), reminders.ReminderArgs{}.Kind(), reminders.EscalationArgs{}.Kind()} {
			for _, j := range apptest.Jobs(t, d.a.Effects.Client(), kind) {
				if !d.worked[j.ID] {
					d.worked[j.ID] = true
					if err := d.a.Effects.WorkJob(t.Context(), j); err != nil {
						t.Fatalf("%s job: %v", kind, err)
					}
				}
			}
		}
	}
}

// tick advances the clock by dt, runs ticks until one claims nothing, then the Slack jobs.
func (d *dueScenario) tick(t *testing.T, dt time.Duration) {
	t.Helper()
	d.clock.Advance(dt)
	for {
		apptest.CatchUp(t, d.a)
		res, err := d.a.Ticker.Tick(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.Claimed == 0 {
			break
		}
	}
	d.slack(t)
}

// thread returns the texts of the replies in an inquiry's thread that are not the thread's own
// status updates.
func (d *dueScenario) thread(t *testing.T, tenant domain.TenantID, id string) []string {
	t.Helper()
	r, err := d.a.Threads.Root(t.Context(), tenant, domain.InquiryID(id))
	if err != nil || r.TS == "" {
		t.Fatalf("no thread for %s: %v", id, err)
	}
	m, _ := d.fake.Message(r.Channel, r.TS)
	var out []string
	for _, rep := range m.Replies {
		if !strings.HasPrefix(rep.Text, "Update (version") {
			out = append(out, rep.Text)
		}
	}
	return out
}

func (d *dueScenario) pendingKinds(t *testing.T, token, id string) []string {
	t.Helper()
	apptest.CatchUp(t, d.a) // the subscribers run by hand here
	det := d.must(t, 200, "GET", "/v1/inquiries/"+id, token, "", "")
	var out []string
	for _, j := range det["pending_jobs"].([]any) {
		m := j.(map[string]any)
		out = append(out, fmt.Sprint(m["kind"], "/", m["target"]))
	}
	slices.Sort(out)
	return out
}

// TestDueSlackScenario: the story end to end, over the HTTP API with the fake Slack and a
// test clock (no sleeps). An inquiry under an SLA policy gets its first-response warning as a
// thread reply, then its breach, then an escalation post in the tenant's escalation channel; a
// second inquiry claimed in time never warns (its claim cancels its warning jobs). The first is
// claimed (its first-response jobs end), gets a follow-up set through the API, which fires once as
// one thread reply mentioning the operator's linked Slack user, and is resolved: nothing is
// pending and nothing more is said, however much time passes.
func TestDueSlackScenario(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const ops, oncall = "C0OPS000001", "C0ONCALL001"
	e := slacktest.New(t, app.Config{DataDir: filepath.Join(t.TempDir(), "data"), DueTick: -1,
		PublicURL: "https://casebook.example", Logger: slog.New(slog.DiscardHandler)},
		slacktest.Options{Start: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC), Fake: fakeslack.Options{Channels: []string{ops, oncall}},
			SigningSecret: "s", Destination: ops, Clearance: "internal"})
	a, clock := e.App, e.Clock
	d := &dueScenario{a: a, clock: clock, fake: e.Fake, srv: httptest.NewServer(a.Handler()), worked: map[int64]bool{}}
	t.Cleanup(d.srv.Close)
	ten, adminTok, olga, opTok := e.Tenant, e.AdminToken, e.Operator, e.OperatorToken
	e.Link(t, "U0OLGA0001", olga)
	d.must(t, 200, "PUT", "/v1/admin/sla-policy", adminTok, "",
		`{"time_zone":"UTC","targets":{"normal":{"first_response":"1h","resolution":"4h"}},"warning_at":0.5}`)
	d.must(t, 200, "PUT", "/v1/admin/slack/escalation", adminTok, "", `{"channel":"`+oncall+`","clearance":"internal"}`)

	// Intake: two inquiries; each gets its thread and its SLA jobs.
	for i, key := range []string{"form-1", "form-2"} {
		code, _, _ := func() (int, map[string]any, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.srv.URL+"/v1/public/acme/inquiries",
				strings.NewReader(fmt.Sprintf(`{"name":"Ada %d","email":"ada%d@example.com","subject":"Invoice","message":"Charged twice","category":"billing"}`, i, i)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, nil, err
			}
			_ = res.Body.Close()
			return res.StatusCode, nil, nil
		}()
		if code != 202 {
			t.Fatalf("intake %s = %d", key, code)
		}
	}
	d.slack(t)
	list := d.must(t, 200, "GET", "/v1/inquiries", opTok, "", "")["items"].([]any)
	if len(list) != 2 {
		t.Fatalf("%d inquiries", len(list))
	}
	first, second := list[0].(map[string]any)["id"].(string), list[1].(map[string]any)["id"].(string)
	want := []string{"sla_breach/first_response", "sla_breach/resolution", "sla_warning/first_response", "sla_warning/resolution"}
	if got := d.pendingKinds(t, opTok, first); !slices.Equal(got, want) {
		t.Fatalf("pending after intake = %v", got)
	}

	// The second inquiry is claimed in time: its first-response warning and breach are cancelled.
	d.must(t, 200, "POST", "/v1/inquiries/"+second+"/claim", opTok, "", "")
	if got := d.pendingKinds(t, opTok, second); !slices.Equal(got, []string{"sla_breach/resolution", "sla_warning/resolution"}) {
		t.Fatalf("pending after the claim = %v", got)
	}

	// 31 minutes: the first inquiry's first-response warning, as a reply in its thread.
	d.tick(t, 31*time.Minute)
	if got := d.thread(t, ten, first); len(got) != 1 || !strings.HasPrefix(got[0], "SLA warning: the first response target") {
		t.Fatalf("thread after the warning = %q", got)
	}
	// 61 minutes: the breach (a reply) and the escalation (a post in the escalation channel).
	d.tick(t, 30*time.Minute)
	got := d.thread(t, ten, first)
	if len(got) != 2 || !strings.HasPrefix(got[1], "SLA breached: the first response target") {
		t.Fatalf("thread after the breach = %q", got)
	}
	posts := d.fake.Messages(oncall)
	if len(posts) != 1 || !strings.Contains(posts[0].Text, "Escalated: inquiry CB-") || !strings.Contains(string(posts[0].Blocks), "first response target was breached") {
		t.Fatalf("escalation channel = %+v", posts)
	}
	if strings.Contains(string(posts[0].Blocks), "Ada") {
		t.Fatal("an internal escalation channel got requester data")
	}
	if r := d.thread(t, ten, second); len(r) != 0 {
		t.Fatalf("the claimed inquiry was warned: %q", r)
	}

	// The claim is the first response: only the resolution clock's jobs remain.
	d.must(t, 200, "POST", "/v1/inquiries/"+first+"/claim", opTok, "", "")
	if got := d.pendingKinds(t, opTok, first); !slices.Equal(got, []string{"sla_breach/resolution", "sla_warning/resolution"}) {
		t.Fatalf("pending after the claim = %v", got)
	}

	// A follow-up set through the API fires once, as one reply mentioning Olga's Slack user.
	fu := d.must(t, 201, "POST", "/v1/inquiries/"+first+"/follow-ups", opTok, "", `{"in":"30m","note":"call Ada back"}`)
	if fu["job_id"] == "" {
		t.Fatalf("follow-up = %v", fu)
	}
	d.tick(t, 31*time.Minute)
	d.tick(t, 5*time.Minute) // a later tick finds nothing more to do
	var reminders []string
	for _, r := range d.thread(t, ten, first) {
		if strings.HasPrefix(r, "Follow-up due") {
			reminders = append(reminders, r)
		}
	}
	if len(reminders) != 1 || !strings.Contains(reminders[0], "<@U0OLGA0001>") || strings.Contains(reminders[0], string(olga.ID)) {
		t.Fatalf("follow-up replies = %q", reminders)
	}

	// Resolution ends every job; hours later nothing fires and nothing is said.
	apptest.CatchUp(t, d.a)
	det := d.must(t, 200, "GET", "/v1/inquiries/"+first, opTok, "", "")
	d.must(t, 200, "POST", "/v1/inquiries/"+first+"/transitions", opTok, fmt.Sprint(det["version"]), `{"to":"resolved"}`)
	if got := d.pendingKinds(t, opTok, first); len(got) != 0 {
		t.Fatalf("pending after resolution = %v", got)
	}
	before := len(d.thread(t, ten, first))
	d.tick(t, 10*time.Hour)
	if n := len(d.thread(t, ten, first)); n != before {
		t.Fatalf("%d replies after resolution, want %d", n, before)
	}
	receipt := det["receipt"].(string)
	n := 0
	for _, p := range d.fake.Messages(oncall) { // the second inquiry, still open, breached its resolution target meanwhile
		if strings.Contains(p.Text, receipt) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d escalation posts for the resolved inquiry, want 1", n)
	}
	var types []string
	apptest.CatchUp(t, d.a)
	for _, e := range d.must(t, 200, "GET", "/v1/inquiries/"+first+"/timeline", opTok, "", "")["items"].([]any) {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	wantTypes := []string{"InquiryReceived", "SLAWarning", "SLABreached", "InquiryEscalated", "InquiryAssigned", "FollowUpScheduled", "FollowUpDue"}
	for _, w := range wantTypes {
		if !slices.Contains(types, w) {
			t.Errorf("timeline %v lacks %s", types, w)
		}
	}
	kinds := streamsRegistered(t, a.Store)
	for _, k := range []eventstore.StreamKind{eventstore.KindInquiry, eventstore.KindSlackThread, eventstore.KindSlackDue} {
		if !kinds[k] {
			t.Errorf("no %s stream in the log: the scenario no longer exercises it", k)
		}
	}
}
