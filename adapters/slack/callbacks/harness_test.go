package callbacks_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/slacktest"
)

const (
	channel = "C0OPS000001"
	secret  = "sig-secret"
	appID   = "A0FAKEAPP01"
	team    = "T0FAKETEAM1"
)

type clock = apptest.Clock

// bundle is one app on SQLite with an installed fake Slack, two linked operators and a
// response_url server whose ephemeral answers arrive on replies.
type bundle struct {
	app     *app.App
	http    http.Handler
	fake    *fakeslack.Server
	clock   *clock
	tenant  domain.TenantID
	olga    domain.Principal
	bob     domain.Principal
	replies chan string
	respURL string
	worked  map[int64]bool
}

func setup(t *testing.T) *bundle { t.Helper(); return setupLogged(t, nil) }

// setupLogged is setup with the app logging to log (nil: the default logger).
func setupLogged(t *testing.T, log *slog.Logger) *bundle {
	t.Helper()
	e := slacktest.New(t, app.Config{DataDir: filepath.Join(t.TempDir(), "data"), Logger: log},
		slacktest.Options{Fake: fakeslack.Options{Channels: []string{channel}}, SigningSecret: secret, AppID: appID,
			Destination: channel, Clearance: "internal"})
	a := e.App
	b := &bundle{app: a, fake: e.Fake, clock: e.Clock, tenant: e.Tenant, olga: e.Operator, replies: make(chan string, 64), worked: map[int64]bool{}}
	resp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Text         string `json:"text"`
			ResponseType string `json:"response_type"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &m); err != nil || m.ResponseType != "ephemeral" {
			b.replies <- "bad reply: " + string(body)
			return
		}
		b.replies <- m.Text
	}))
	t.Cleanup(resp.Close)
	b.respURL = resp.URL + "/actions/T/1/x"
	a.Callbacks.ResponseURLPrefix = resp.URL + "/actions/"
	a.Callbacks.AckBudget = time.Minute // tests wait for the answer, never for the clock
	b.http = a.Handler()
	b.bob, _ = e.NewOperator(t, "Bob")
	e.Link(t, "U0OLGA0001", b.olga)
	e.Link(t, "U0BOB00001", b.bob)
	return b
}

// posted takes an inquiry in and projects it to a root message; it returns the id and root ts.
func (b *bundle) posted(t *testing.T, key string) (domain.InquiryID, string) {
	t.Helper()
	res, err := b.app.Commands.Intake(t.Context(), commands.Intake{Tenant: b.tenant, Source: domain.SourcePublicForm, IdempotencyKey: key,
		Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"}, Subject: "Invoice twice", Message: "Charged twice.", Category: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	b.sync(t)
	for _, m := range b.fake.Messages(channel) {
		if id, err := b.app.Threads.ThreadByRoot(t.Context(), b.tenant, "/"+team+"/"+appID, channel, m.TS); err == nil && id == res.InquiryID {
			return id, m.TS
		}
	}
	t.Fatal("no root message mapped to the inquiry")
	return "", ""
}

// sync projects the log, works every new Slack job, and projects again (the thread mapping).
func (b *bundle) sync(t *testing.T) {
	t.Helper()
	b.project(t)
	for _, j := range apptest.Jobs(t, b.app.Effects.Client(), threads.SyncArgs{}.Kind()) {
		if b.worked[j.ID] {
			continue
		}
		b.worked[j.ID] = true
		if err := b.app.Effects.WorkJob(t.Context(), j); err != nil {
			t.Fatalf("slack job: %v", err)
		}
	}
	b.project(t)
}

func (b *bundle) project(t *testing.T) { t.Helper(); apptest.CatchUp(t, b.app) }

// click is a block_actions payload from a user of a workspace on a root message.
func click(teamID, user, ts, action, actionTS, responseURL string) string {
	return clickTrigger(teamID, user, ts, action, actionTS, "trig."+actionTS, responseURL)
}

// clickTrigger is click with the trigger id Slack issued for it.
func clickTrigger(teamID, user, ts, action, actionTS, trigger, responseURL string) string {
	return fmt.Sprintf(`{"type":"block_actions","team":{"id":%q},"api_app_id":%q,"user":{"id":%q},"channel":{"id":%q},
		"container":{"type":"message","channel_id":%q,"message_ts":%q},"message":{"ts":%q},"trigger_id":%q,
		"response_url":%q,"actions":[{"action_id":%q,"block_id":"casebook_actions","value":"CB-IGNORED","action_ts":%q}]}`,
		teamID, appID, user, channel, channel, ts, ts, trigger, responseURL, action, actionTS)
}

// submit is a view_submission payload of a modal opened on a root message.
func submit(user, ts, callback, viewID, input, value string) string {
	key := "value"
	if input == "owner" {
		key = "selected_user"
	}
	return fmt.Sprintf(`{"type":"view_submission","team":{"id":%q},"api_app_id":%q,"user":{"id":%q},
		"view":{"id":%q,"callback_id":%q,"private_metadata":"%s %s","state":{"values":{%q:{%q:{%q:%q}}}}}}`,
		team, appID, user, viewID, callback, channel, ts, input, input, key, value)
}

// request signs body with secret at the clock's time (shifted by skew) for path.
func (b *bundle) request(path, body, sec string, skew time.Duration) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	ts := strconv.FormatInt(b.clock.Now().Add(skew).Unix(), 10)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", signatureFor(sec, ts, body))
	return req
}

func (b *bundle) serve(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	b.http.ServeHTTP(rec, req)
	return rec
}

// interact posts a signed interaction payload and returns the response.
func (b *bundle) interact(t *testing.T, payload string) *httptest.ResponseRecorder {
	t.Helper()
	return b.serve(b.request("/slack/interactions", "payload="+url.QueryEscape(payload), secret, 0))
}

// reply waits for the next ephemeral answer posted to response_url.
func (b *bundle) reply(t *testing.T) string {
	t.Helper()
	select {
	case r := <-b.replies:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("no answer on response_url")
		return ""
	}
}

func (b *bundle) inquiry(t *testing.T, id domain.InquiryID) *domain.Inquiry {
	t.Helper()
	q, err := b.app.Commands.Load(t.Context(), b.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

type httptestReq struct{ req *http.Request }

func ioNop(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
