package threads_test

import (
	"encoding/json"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// TestLegacyCombinedStreamStillRead: a thread recorded before thread and List events had streams of
// their own (SlackThreadPosted in slackproj-{tenant}-{inquiry}) is still the inquiry's thread. The
// worker updates that root instead of posting a second one, and the mapping shows it; no replay
// is needed.
func TestLegacyCombinedStreamStillRead(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		first := b.intake(t, "k1")
		b.project(t)
		noErrors(t, b.work(t))
		evs, err := b.app.Store.ReadStream(ctx, threads.Stream(b.tenant, first), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var posted threads.SlackThreadPosted
		for _, e := range evs {
			if e.Type == "SlackThreadPosted" {
				if err := json.Unmarshal(e.Data, &posted); err != nil {
					t.Fatal(err)
				}
			}
		}
		if posted.Installation == "" {
			t.Fatal("the first inquiry's thread was not posted")
		}

		// A root posted by an earlier version, recorded in the combined stream only.
		id := b.intake(t, "k2")
		ts, err := b.fake.InjectMessage(channel, fakeslack.Message{User: b.fake.BotUserID(), BotID: b.fake.BotID(), Text: "earlier root"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := slackinstall.AppendEvent(ctx, b.app.Store, slackeffects.LegacyStream(b.tenant, id), eventstore.NoStream(), b.tenant,
			"system", "legacy-"+string(id), b.clock.Now(), "SlackThreadPosted",
			threads.SlackThreadPosted{Installation: posted.Installation, Channel: channel, TS: ts, Version: 1}); err != nil {
			t.Fatal(err)
		}
		b.project(t)
		noErrors(t, b.work(t))
		b.transition(t, id, domain.StatusTriaged, "")
		b.project(t)
		noErrors(t, b.work(t))
		b.project(t)

		if n := len(b.roots()); n != 2 {
			t.Fatalf("%d roots in the channel, want 2 (the legacy root must not be posted again)", n)
		}
		if m, ok := b.fake.Message(channel, ts); !ok || m.EditedTS == "" {
			t.Fatalf("the legacy root was not updated: %+v (found %v)", m, ok)
		}
		h, err := b.app.Threads.Health(ctx, b.tenant, id)
		if err != nil || h.Channel != channel || h.ObservedVersion != 2 {
			t.Fatalf("mapping of the legacy thread = %+v, %v", h, err)
		}
	})
}
