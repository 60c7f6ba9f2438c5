package callbacks_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/httptestclient"
)

func signedJSON(now time.Time, path, body, sec string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", signatureFor(sec, ts, body))
	return req
}

// TestURLVerificationBeforeFirstInstall: with the app's signing secret configured
// (CASEBOOK_SLACK_SIGNING_SECRET), Slack's Events URL check succeeds before any installation
// exists; another secret is still 401. An installation recorded without a secret of its own is
// then verified with the app's.
func TestURLVerificationBeforeFirstInstall(t *testing.T) {
	t.Parallel()
	c := apptest.NewClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	a := apptest.Open(t, app.Config{DataDir: filepath.Join(t.TempDir(), "data"), Now: c.Now,
		SlackOAuth: slackinstall.OAuthConfig{SigningSecret: "app-secret"}})
	h := a.Handler()
	serve := func(req *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	check := `{"type":"url_verification","challenge":"ch4ll3nge"}`
	if rec := serve(signedJSON(c.Now(), "/slack/events", check, "app-secret")); rec.Code != 200 || !strings.Contains(rec.Body.String(), "ch4ll3nge") {
		t.Fatalf("url_verification before install = %d %s", rec.Code, rec.Body)
	}
	if rec := serve(signedJSON(c.Now(), "/slack/events", check, "not-the-app")); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong secret = %d", rec.Code)
	}
	fake := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{channel}})
	ten, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: ten.ID, Token: fake.Token(), APIURL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	ev := `{"type":"event_callback","team_id":"` + team + `","api_app_id":"` + appID + `","event_id":"Ev1","event":{"type":"app_uninstalled"}}`
	if rec := serve(signedJSON(c.Now(), "/slack/events", ev, "app-secret")); rec.Code != 200 {
		t.Fatalf("event for an installation without its own secret = %d %s", rec.Code, rec.Body)
	}
	evs, err := a.Store.ReadStream(t.Context(), slackinstall.InstallationStream(ten.ID), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	disabled := 0
	for _, e := range evs {
		if e.Type == "SlackInstallationDisabled" {
			disabled++
		}
	}
	if disabled != 1 || in.AppID != appID {
		t.Fatalf("the event was not bound to installation %s (%d disabled events)", in.Key, disabled)
	}
}

// TestInstallRefusedWithoutUsableAppID: an installation Slack's requests could not be matched to is
// refused at install time, and nothing is recorded: no app id learnable (bots.info needs
// users:read) and none given; a given app id the token does not belong to; no signing secret at all.
// With users:read the app id is learned.
func TestInstallRefusedWithoutUsableAppID(t *testing.T) {
	t.Parallel()
	c := apptest.NewClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	a := apptest.Open(t, app.Config{DataDir: filepath.Join(t.TempDir(), "data"), Now: c.Now})
	ten, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	narrow := fakeslack.NewTestServer(t, fakeslack.Options{Scopes: []string{fakeslack.ScopeChatWrite, fakeslack.ScopeChannelsHistory}})
	full := fakeslack.NewTestServer(t, fakeslack.Options{})
	for name, r := range map[string]slackinstall.InstallRequest{
		"app id not learnable": {Tenant: ten.ID, Token: narrow.Token(), SigningSecret: "s", APIURL: narrow.URL()},
		"another app's id":     {Tenant: ten.ID, Token: full.Token(), SigningSecret: "s", AppID: "A0OTHERAPP1", APIURL: full.URL()},
		"no signing secret":    {Tenant: ten.ID, Token: full.Token(), APIURL: full.URL()},
	} {
		_, err := a.Slack.Install(t.Context(), r)
		var ve *domain.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: install = %v, want a validation error", name, err)
		}
		if _, err := a.Slack.NewestInstallation(t.Context(), ten.ID); err == nil {
			t.Fatalf("%s: an installation was recorded", name)
		}
	}
	in, err := a.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: ten.ID, Token: full.Token(), SigningSecret: "s", APIURL: full.URL()})
	if err != nil || in.AppID != appID || in.Key != "/"+team+"/"+appID {
		t.Fatalf("learned install = %+v, %v", in, err)
	}
	// The narrow token with the right id given is accepted: the id is the operator's word.
	if in, err := a.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: ten.ID, Token: narrow.Token(), SigningSecret: "s", AppID: appID, APIURL: narrow.URL()}); err != nil || in.AppID != appID {
		t.Fatalf("narrow token with --app-id = %+v, %v", in, err)
	}
}

// TestDestinationChecked: `slack destination` asks Slack (conversations.info): a channel Slack does
// not know is refused, one the bot is not in is refused with how to invite it, and once invited
// the destination is set and says so; without channels:read it is set, marked not checked.
func TestDestinationChecked(t *testing.T) {
	t.Parallel()
	c := apptest.NewClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	a := apptest.Open(t, app.Config{DataDir: filepath.Join(t.TempDir(), "data"), Now: c.Now})
	ten, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	fake := fakeslack.NewTestServer(t, fakeslack.Options{})
	fake.AddChannelWithoutBot("C0NOBOT0001")
	if _, err := a.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: ten.ID, Token: fake.Token(), SigningSecret: "s", APIURL: fake.URL()}); err != nil {
		t.Fatal(err)
	}
	set := func(ch string) (slackinstall.Destination, error) {
		return a.Slack.SetDestination(t.Context(), slackinstall.DestinationRequest{Tenant: ten.ID, Channel: ch, Clearance: "internal"})
	}
	if _, err := set("C0NOSUCH001"); err == nil || !strings.Contains(err.Error(), "knows no channel") {
		t.Fatalf("unknown channel = %v", err)
	}
	if _, err := set("C0NOBOT0001"); err == nil || !strings.Contains(err.Error(), "/invite") {
		t.Fatalf("channel without the bot = %v", err)
	}
	if _, err := a.Slack.DestinationFor(t.Context(), ten.ID, ""); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a refused destination was recorded: %v", err)
	}
	fake.InviteBot("C0NOBOT0001")
	if d, err := set("C0NOBOT0001"); err != nil || d.Checked != "bot is a member" {
		t.Fatalf("after invite = %+v, %v", d, err)
	}
	narrow := fakeslack.NewTestServer(t, fakeslack.Options{Channels: []string{"C0NARROW001"}, Scopes: []string{fakeslack.ScopeChatWrite, fakeslack.ScopeChannelsHistory}})
	other, _, _, err := a.Tenancy.CreateTenant(t.Context(), "globex")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: other.ID, Token: narrow.Token(), SigningSecret: "s", AppID: "A0NARROW001", APIURL: narrow.URL()}); err != nil {
		t.Fatal(err)
	}
	if d, err := a.Slack.SetDestination(t.Context(), slackinstall.DestinationRequest{Tenant: other.ID, Channel: "C0NARROW001", Clearance: "internal"}); err != nil || d.Checked != "not checked: missing_scope" {
		t.Fatalf("without channels:read = %+v, %v", d, err)
	}
}

// TestEscalationDestinationChecked: the escalation destination is checked with Slack like a thread
// destination, through the admin API: an unknown channel and a channel without the bot are
// refused (422, with how to invite the bot) and nothing is recorded; once invited it is set and
// the answer says the bot is a member.
func TestEscalationDestinationChecked(t *testing.T) {
	t.Parallel()
	c := apptest.NewClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	a := apptest.Open(t, app.Config{DataDir: filepath.Join(t.TempDir(), "data"), Now: c.Now})
	ten, _, adminTok, err := a.Tenancy.CreateTenant(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	fake := fakeslack.NewTestServer(t, fakeslack.Options{})
	fake.AddChannelWithoutBot("C0ONCALL001")
	if _, err := a.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: ten.ID, Token: fake.Token(), SigningSecret: "s", APIURL: fake.URL()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	put := func(ch string) (int, string) {
		code, body, err := httptestclient.Client{Base: srv.URL}.Raw(context.Background(), httptestclient.Request{Method: http.MethodPut,
			Path: "/v1/admin/slack/escalation", Token: adminTok, Body: `{"channel":"` + ch + `","clearance":"internal"}`})
		if err != nil {
			t.Fatal(err)
		}
		return code, string(body)
	}
	if code, body := put("C0NOSUCH001"); code != 422 || !strings.Contains(body, "knows no channel") {
		t.Fatalf("unknown channel = %d %s", code, body)
	}
	if code, body := put("C0ONCALL001"); code != 422 || !strings.Contains(body, "/invite") {
		t.Fatalf("channel without the bot = %d %s", code, body)
	}
	if _, err := a.Slack.EscalationDestination(t.Context(), ten.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a refused escalation destination was recorded: %v", err)
	}
	fake.InviteBot("C0ONCALL001")
	if code, body := put("C0ONCALL001"); code != 200 || !strings.Contains(body, `"checked":"bot is a member"`) {
		t.Fatalf("after invite = %d %s", code, body)
	}
	if d, err := a.Slack.EscalationDestination(t.Context(), ten.ID); err != nil || d.Channel != "C0ONCALL001" {
		t.Fatalf("stored = %+v, %v", d, err)
	}
}
