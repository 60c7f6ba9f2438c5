// Package slacktest is the tests' Slack set-up: the application on one backend with a hand-driven
// clock, a fake Slack workspace, a tenant with its admin and an operator, and the workspace
// installed for the tenant (optionally with a thread destination). Only tests import it; it sits
// on top with app (internal/layers).
package slacktest

import (
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
)

// Options shape an Env; the zero value is an app on cfg's backend, the fake with no channels and
// the installation without a destination.
type Options struct {
	// Start is the clock's start (default 2026-11-01 09:00 UTC).
	Start time.Time
	// Fake configures the fake Slack; with FakeOnClock its clock is the Env's.
	Fake        fakeslack.Options
	FakeOnClock bool
	// Slug is the tenant's (default "acme").
	Slug string
	// SigningSecret (default "sig") and AppID (default "A0FAKEAPP01") of the installation.
	SigningSecret string
	AppID         string
	// NoInstall leaves Slack uninstalled (Env.Install installs it later).
	NoInstall bool
	// Destination, when set, is the tenant's thread channel, cleared for Clearance.
	Destination string
	Clearance   string
}

// Env is one tenant's app with a fake Slack.
type Env struct {
	App   *app.App
	Fake  *fakeslack.Server
	Clock *apptest.Clock
	// Tenant, its admin and its operator Olga (team support), with their API tokens.
	Tenant        domain.TenantID
	Slug          string
	Admin         domain.Principal
	AdminToken    string
	Operator      domain.Principal
	OperatorToken string
	// Installation is the fake's, once installed.
	Installation slackinstall.Installation

	opts Options
}

// New opens the app on cfg (its Now is the Env's clock), starts the fake, makes the tenant and
// its operator and, unless NoInstall, installs Slack.
func New(t testing.TB, cfg app.Config, o Options) *Env {
	t.Helper()
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	}
	if o.Slug == "" {
		o.Slug = "acme"
	}
	if o.SigningSecret == "" {
		o.SigningSecret = "sig"
	}
	if o.AppID == "" {
		o.AppID = "A0FAKEAPP01"
	}
	e := &Env{Clock: apptest.NewClock(o.Start), Slug: o.Slug, opts: o}
	cfg.Now = e.Clock.Now
	e.App = apptest.Open(t, cfg)
	if o.FakeOnClock {
		o.Fake.Clock = e.Clock
	}
	e.Fake = fakeslack.NewTestServer(t, o.Fake)
	ten, admin, adminTok, err := e.App.Tenancy.CreateTenant(t.Context(), o.Slug)
	if err != nil {
		t.Fatal(err)
	}
	e.Tenant, e.Admin, e.AdminToken = ten.ID, admin, adminTok
	e.Operator, e.OperatorToken = e.NewOperator(t, "Olga")
	if !o.NoInstall {
		e.Install(t, o.Destination, o.Clearance)
	}
	return e
}

// NewOperator creates an operator of team support named name; it returns it and its API token.
func (e *Env) NewOperator(t testing.TB, name string) (domain.Principal, string) {
	t.Helper()
	p, tok, err := e.App.Tenancy.CreatePrincipal(t.Context(), e.Slug, name, domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	return p, tok
}

// Install installs the fake as the tenant's workspace and, when channel is not empty, makes it the
// thread destination cleared for clearance.
func (e *Env) Install(t testing.TB, channel, clearance string) {
	t.Helper()
	in, err := e.App.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: e.Tenant, Token: e.Fake.Token(),
		SigningSecret: e.opts.SigningSecret, AppID: e.opts.AppID, APIURL: e.Fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	e.Installation = in
	if channel == "" {
		return
	}
	if _, err := e.App.Slack.SetDestination(t.Context(), slackinstall.DestinationRequest{Tenant: e.Tenant, Channel: channel, Clearance: clearance}); err != nil {
		t.Fatal(err)
	}
}

// Link links Slack user slackUser of the installation to p.
func (e *Env) Link(t testing.TB, slackUser string, p domain.Principal) {
	t.Helper()
	if _, err := e.App.Slack.LinkUser(t.Context(), e.Tenant, "", slackUser, p.ID); err != nil {
		t.Fatal(err)
	}
}
