package threads_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/projections"
)

// TestInstallSealsSecretsAndAudits: secrets are not stored in the clear; a reinstall supersedes
// the installation with an audit event; another tenant cannot take the same installation key;
// a channel move is audited and the thread gets a new mapping while the inquiry id stays.
func TestInstallSealsSecretsAndAudits(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		var n int
		if err := b.app.DB.QueryRowContext(ctx, `SELECT count(*) FROM slack_installations WHERE token_sealed LIKE '%xoxb%' OR signing_sealed LIKE '%sig-secret%'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("plaintext secrets stored: %d %v", n, err)
		}
		in, err := b.app.Slack.Install(ctx, slackinstall.InstallRequest{Tenant: b.tenant, Token: b.fake.Token(), SigningSecret: "sig2", AppID: "A0FAKEAPP01", APIURL: b.fake.URL()})
		if err != nil {
			t.Fatal(err)
		}
		if in.TeamID != "T0FAKETEAM1" || in.Key != "/T0FAKETEAM1/A0FAKEAPP01" {
			t.Fatalf("installation = %+v", in)
		}
		if sec, err := b.app.Slack.SigningSecret(ctx, b.tenant, in.ID); err != nil || sec != "sig2" {
			t.Fatalf("signing secret = %q, %v", sec, err)
		}
		other, _, _, err := b.app.Tenancy.CreateTenant(ctx, "other")
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.app.Slack.Install(ctx, slackinstall.InstallRequest{Tenant: other.ID, Token: b.fake.Token(), SigningSecret: "x", AppID: "A0FAKEAPP01", APIURL: b.fake.URL()})
		if !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("another tenant installed the same key: %v", err)
		}
		id := b.intake(t, "k1")
		b.project(t)
		noErrors(t, b.work(t))
		b.fake.AddChannel("C0MOVED0001")
		if _, err := b.app.Slack.SetDestination(ctx, slackinstall.DestinationRequest{Tenant: b.tenant, Channel: "C0MOVED0001", Clearance: "internal"}); err != nil {
			t.Fatal(err)
		}
		b.transition(t, id, domain.StatusTriaged, "")
		b.project(t)
		noErrors(t, b.work(t))
		if n := len(b.fake.Messages("C0MOVED0001")); n != 1 {
			t.Fatalf("%d roots in the new channel, want 1", n)
		}
		evs, err := b.app.Store.ReadStream(ctx, slackinstall.InstallationStream(b.tenant), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range evs {
			types = append(types, e.Type)
		}
		if got := strings.Join(types, ","); got != "SlackInstalled,SlackDestinationSet,SlackInstalled,SlackDestinationSet" {
			t.Fatalf("audit = %s", got)
		}
		thread, err := b.app.Store.ReadStream(ctx, threads.Stream(b.tenant, id), 0, 0)
		if err != nil || len(thread) != 2 || thread[1].Type != "SlackThreadPosted" {
			t.Fatalf("thread mappings = %d %v", len(thread), err)
		}
	})
}

// TestRebuildDoesNotReemit: rebuilding slackintents from the log restores the thread mapping and
// inserts no job, however many effects the live generation emitted.
func TestRebuildDoesNotReemit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		id := b.intake(t, "k1")
		b.project(t)
		noErrors(t, b.work(t))
		b.transition(t, id, domain.StatusTriaged, "")
		b.project(t)
		noErrors(t, b.work(t))
		b.project(t)
		before := len(b.jobs(t))
		p, err := b.app.Projection(threads.IntentsName)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := projections.Rebuild(ctx, b.app.Store, b.app.DB, p, projections.RebuildOptions{Now: b.clock.Now, ProgressEvery: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if after := len(b.jobs(t)); after != before {
			t.Fatalf("rebuild inserted %d jobs", after-before)
		}
		h, err := b.app.Threads.Health(ctx, b.tenant, id)
		if err != nil || h.State != "synced" || h.Channel != channel || h.ObservedVersion != 2 {
			t.Fatalf("mapping after rebuild = %+v, %v", h, err)
		}
	})
}
