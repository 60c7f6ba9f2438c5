package slackeffects_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

// panicArgs is a test effect kind's job: At says where its kind panics ("plan" or "do").
type panicArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	At      string           `json:"at"`
}

func (panicArgs) Kind() string { return "test_panic" }
func (a panicArgs) EffectRef() slackeffects.Ref {
	return slackeffects.Ref{Tenant: a.Tenant, Inquiry: a.Inquiry, Destination: channel}
}

// panicKind panics in Plan or in its plan's Do, as a kind's bug in rendering or calling would.
type panicKind struct{ in slackinstall.Installation }

func (k panicKind) Plan(_ context.Context, a panicArgs) (*slackeffects.Plan, error) {
	if a.At == "plan" {
		panic("plan cannot read " + string(a.Inquiry))
	}
	return &slackeffects.Plan{
		Target:       slackeffects.Target{Tenant: a.Tenant, Installation: k.in.Key, Destination: channel, Inquiry: a.Inquiry},
		Installation: k.in,
		Do:           func(context.Context, *slack.Client) error { panic("render cannot place " + string(a.Inquiry)) },
	}, nil
}

// TestPanickingEffectFailsItsJob: a panic in a kind's Plan, or in its Do (render and call), fails
// that job with "panic: …" instead of ending the worker; one in Do is recorded in the target's
// health as a failure of unknown outcome (the call may have gone out), so the job is retried with
// backoff and reconciled like any such failure. The runtime works the next job as usual.
func TestPanickingEffectFailsItsJob(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		in, err := b.app.Slack.InstallationOfKey(ctx, b.tenant, b.key)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := slackeffects.New(ctx, b.app.DB, b.app.Slack, b.app.Store, b.clock.Now, slackeffects.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := slackeffects.Register(rt, panicKind{in: in}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Open(); err != nil {
			t.Fatal(err)
		}
		for _, at := range []string{"plan", "do"} {
			if err := rt.Insert(ctx, panicArgs{Tenant: b.tenant, Inquiry: domain.InquiryID("inq-" + at), At: at}); err != nil {
				t.Fatal(err)
			}
		}
		jobs := map[string]error{}
		for _, j := range b.jobs(t, "test_panic") {
			jobs[string(j.EncodedArgs)] = rt.WorkJob(ctx, j)
		}
		if len(jobs) != 2 {
			t.Fatalf("%d jobs worked, want 2", len(jobs))
		}
		for args, err := range jobs {
			want := "panic: plan cannot read inq-plan"
			if strings.Contains(args, `"do"`) {
				want = "panic: render cannot place inq-do"
			}
			if err == nil || err.Error() != want {
				t.Errorf("job %s: WorkJob = %v, want %q", args, err, want)
			}
		}
		hs, err := rt.Health(ctx, b.tenant, "inq-do", "test_panic")
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 || hs[0].ErrorClass != slackeffects.ClassUnknown || hs[0].LastError != "panic: render cannot place inq-do" {
			t.Fatalf("health of the panicking call = %+v, want an unknown-outcome failure with the panic", hs)
		}
	})
}
