package threads_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("work: %v", err)
		}
	}
}

func oneRoot(t *testing.T, b *bundle) fakeslack.Message {
	t.Helper()
	roots := b.roots()
	if len(roots) != 1 {
		t.Fatalf("%d root messages, want exactly 1", len(roots))
	}
	return roots[0]
}

// TestRootPostedThenUpdatedAndReplied: intake → one root with metadata; a transition updates the
// root and replies in its thread; the mapping and health follow.
func TestRootPostedThenUpdatedAndReplied(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		id := b.intake(t, "k1")
		b.project(t)
		noErrors(t, b.work(t))
		root := oneRoot(t, b)
		if root.Metadata == nil || root.Metadata.EventType != threads.MetadataEventType {
			t.Fatalf("root carries no effect metadata: %+v", root.Metadata)
		}
		b.transition(t, id, domain.StatusTriaged, domain.PriorityHigh)
		b.project(t)
		noErrors(t, b.work(t))
		root = oneRoot(t, b)
		if root.EditedTS == "" || len(root.Replies) != 1 || !strings.Contains(root.Replies[0].Text, "triaged") {
			t.Fatalf("root not updated or no reply: edited=%q replies=%+v", root.EditedTS, root.Replies)
		}
		b.project(t)
		h, err := b.app.Threads.Health(t.Context(), b.tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if h.State != "synced" || h.DesiredVersion != 2 || h.ObservedVersion != 2 || h.LastSuccess == nil {
			t.Fatalf("health = %+v", h)
		}
	})
}

// TestRootOnceWhenPostTimesOutAfterApply: the post is applied but the client never hears back; the
// retry finds the effect key in conversations.history and adopts the message.
func TestRootOnceWhenPostTimesOutAfterApply(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		id := b.intake(t, "k1")
		b.project(t)
		b.fake.FailNext("chat.postMessage", fakeslack.TimeoutAfterApply(0))
		j := b.jobs(t)[0]
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			_ = b.fake.WaitHung(ctx, 1)
			cancel() // the caller gives up: result unknown
		}()
		if err := b.workJob(ctx, t, j); err == nil {
			t.Fatal("timed-out post reported success")
		}
		h, _ := b.app.Threads.Health(t.Context(), b.tenant, id)
		if h.State != "failed" || h.ErrorClass != string(slackeffects.ClassUnknown) {
			t.Fatalf("health after timeout = %+v", h)
		}
		b.clock.Advance(2 * time.Minute) // past the in-flight guard
		if err := b.workJob(t.Context(), t, j); err != nil {
			t.Fatal(err)
		}
		oneRoot(t, b)
		if n := b.fake.CallCount("chat.postMessage"); n != 1 {
			t.Fatalf("chat.postMessage called %d times, want 1", n)
		}
		if b.fake.CallCount("conversations.history") == 0 {
			t.Fatal("no reconciliation before re-posting")
		}
	})
}

// TestRootOnceWhenWorkerCrashesAfterPost: the worker dies between the post and its record.
func TestRootOnceWhenWorkerCrashesAfterPost(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.intake(t, "k1")
		b.project(t)
		j := b.jobs(t)[0]
		b.app.Threads.SetAfterPost(func() error { return errors.New("crash") })
		if err := b.workJob(t.Context(), t, j); err == nil {
			t.Fatal("crash not reported")
		}
		b.app.Threads.SetAfterPost(nil)
		// A retry while the attempt may still be in flight waits instead of posting.
		var snooze *river.JobSnoozeError
		if err := b.workJob(t.Context(), t, j); !errors.As(err, &snooze) {
			t.Fatalf("retry inside the in-flight window: %v, want snooze", err)
		}
		b.clock.Advance(2 * time.Minute)
		if err := b.workJob(t.Context(), t, j); err != nil {
			t.Fatal(err)
		}
		oneRoot(t, b)
		if n := b.fake.CallCount("chat.postMessage"); n != 1 {
			t.Fatalf("chat.postMessage called %d times, want 1", n)
		}
	})
}

// TestRootOnceWhenJobRunsTwice: the same job worked twice at once, then again.
func TestRootOnceWhenJobRunsTwice(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.intake(t, "k1")
		b.project(t)
		j := b.jobs(t)[0]
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { _ = b.workJob(t.Context(), t, j) })
		}
		wg.Wait()
		b.clock.Advance(2 * time.Minute)
		if err := b.workJob(t.Context(), t, j); err != nil {
			t.Fatal(err)
		}
		oneRoot(t, b)
		if n := b.fake.CallCount("chat.postMessage"); n != 1 {
			t.Fatalf("chat.postMessage called %d times, want 1", n)
		}
	})
}

// TestBurstCoalesces: a burst of 20 transitions on one inquiry costs at most 3 Slack writes in
// all (root post, one update, one reply), whether the projection sees the burst in one batch (one
// job) or event by event (20 jobs: the first applies the newest version, the rest do nothing).
func TestBurstCoalesces(t *testing.T) {
	t.Parallel()
	for _, perEvent := range []bool{false, true} {
		t.Run(map[bool]string{false: "one_batch", true: "job_per_transition"}[perEvent], func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, b *bundle) {
				id := b.intake(t, "k1")
				b.project(t)
				noErrors(t, b.work(t))
				steps := []domain.Status{domain.StatusTriaged, domain.StatusInProgress}
				for i := range 18 {
					steps = append(steps, map[bool]domain.Status{true: domain.StatusWaiting, false: domain.StatusInProgress}[i%2 == 0])
				}
				for _, to := range steps {
					b.transition(t, id, to, "")
					if perEvent {
						b.project(t)
					}
				}
				b.project(t)
				noErrors(t, b.work(t))
				writes := b.writes()
				t.Logf("burst of 20 transitions: %d Slack writes in all, %d jobs", writes, len(b.jobs(t)))
				if writes > 3 {
					t.Fatalf("%d Slack writes, want at most 3", writes)
				}
				root := oneRoot(t, b)
				if len(root.Replies) != 1 || !strings.Contains(root.Replies[0].Text, "version 21") {
					t.Fatalf("replies = %+v", root.Replies)
				}
			})
		})
	}
}

// TestRootRecoveredUnderHistoryLimits: against Slack's limits for apps outside the Marketplace
// (15 messages per conversations.history call, one call a minute), a root whose post had an
// unknown outcome in a busy channel is still found and adopted, never posted twice: the lookup
// reads only the attempt's own window (its start and timeout, oldest/latest), not the channel's
// newest pages, and a lookup cut short by the rate limit resumes below the part it already read.
func TestRootRecoveredUnderHistoryLimits(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			b := setupWith(t, be.Config(t), "personal", fakeslack.Options{NonMarketplace: true})
			people := func(n int, every time.Duration) {
				for range n {
					b.clock.Advance(every)
					if _, err := b.fake.InjectMessage(channel, fakeslack.Message{Text: "chatter"}); err != nil {
						t.Fatal(err)
					}
				}
			}
			people(30, 10*time.Second) // five minutes of talk before the inquiry
			b.intake(t, "k1")
			b.project(t)
			b.fake.FailNext("chat.postMessage", fakeslack.TimeoutAfterApply(0))
			j := b.jobs(t)[0]
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				_ = b.fake.WaitHung(ctx, 1)
				cancel() // the caller gives up: result unknown
			}()
			if err := b.workJob(ctx, t, j); err == nil {
				t.Fatal("timed-out post reported success")
			}
			people(20, time.Second) // the root is now below 20 newer messages in its own window
			b.clock.Advance(10 * time.Minute)
			people(60, time.Second) // and below 60 more after the window
			for i := 0; ; i++ {
				if i == 10 {
					t.Fatal("the lookup did not converge in 10 runs")
				}
				b.clock.Advance(2 * time.Minute) // past the in-flight guard, the cooldown and the rate-limit minute
				if err := b.workJob(t.Context(), t, j); err == nil {
					break
				}
			}
			ours := 0
			for _, m := range b.roots() {
				if m.BotID == b.fake.BotID() {
					ours++
				}
			}
			if ours != 1 || b.fake.CallCount("chat.postMessage") != 1 {
				t.Fatalf("%d roots of ours, %d posts; want the one timed-out post adopted", ours, b.fake.CallCount("chat.postMessage"))
			}
			answered, limited := 0, 0
			for _, c := range b.fake.Calls() {
				if c.Method != "conversations.history" {
					continue
				}
				switch c.Status {
				case http.StatusOK:
					answered++
				case http.StatusTooManyRequests:
					limited++
				}
			}
			// The window holds about 27 messages (two pages of 15); the channel's newest pages would
			// need five calls to reach the root, and a restart from the top would never get there.
			if answered != 2 || limited == 0 {
				t.Fatalf("conversations.history: %d answered, %d rate-limited; want 2 answered after a 429", answered, limited)
			}
		})
	}
}

// TestThreadDeletedUnderHistoryLimits: an erased inquiry's thread, longer than one page of
// conversations.replies under Slack's non-Marketplace limits (15 messages a call, one call a
// minute), is deleted over several runs: each run deletes what it read before the 429, the replies
// people wrote (which the app may not delete) are counted and kept, and the root goes last.
func TestThreadDeletedUnderHistoryLimits(t *testing.T) {
	t.Parallel()
	b := setupWith(t, backends[0].Config(t), "personal", fakeslack.Options{NonMarketplace: true})
	id := b.intake(t, "k1")
	b.project(t)
	noErrors(t, b.work(t))
	root := oneRoot(t, b).TS
	for i := range 25 {
		m := fakeslack.Message{ThreadTS: root, Text: "ours", BotID: b.fake.BotID(), User: b.fake.BotUserID()}
		if i%10 == 0 {
			m = fakeslack.Message{ThreadTS: root, Text: "a person's"}
		}
		b.clock.Advance(time.Second)
		if _, err := b.fake.InjectMessage(channel, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.app.Commands.Erase(t.Context(), commands.Erase{Target: commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.admin}}); err != nil {
		t.Fatal(err)
	}
	b.project(t)
	runs := 0
	for len(b.roots()) > 0 && (len(b.roots()) != 1 || b.roots()[0].Subtype != "tombstone") {
		if runs++; runs > 10 {
			t.Fatalf("the thread was not deleted in 10 runs: %d replies left", len(b.roots()[0].Replies))
		}
		b.clock.Advance(2 * time.Minute) // past the cooldown and the rate-limit minute
		for _, j := range b.jobs(t) {
			_ = b.workJob(t.Context(), t, j)
		}
		b.project(t)
	}
	if runs < 2 {
		t.Fatalf("deleted in %d run: the thread fit one page", runs)
	}
	left := b.roots()
	if len(left) != 1 || len(left[0].Replies) != 3 {
		t.Fatalf("left %+v, want the root's tombstone with the 3 replies people wrote", left)
	}
	for _, r := range left[0].Replies {
		if r.Text != "a person's" {
			t.Fatalf("a reply of ours was left: %+v", r)
		}
	}
}

// TestThreadDeletionResumesAfterPeoplesReplies: an erased inquiry's thread opens with more replies
// people wrote (which the app may not delete) than one page of conversations.replies holds under
// the non-Marketplace limits. Each run records the last reply it examined and the next run reads
// after it, so the thread converges: every reply of ours and the root are deleted, the people's
// replies stay, and SlackThreadDeleted counts each of them once. Reading from the top each run
// met the same page of people's replies and a 429 every time.
func TestThreadDeletionResumesAfterPeoplesReplies(t *testing.T) {
	t.Parallel()
	b := setupWith(t, backends[0].Config(t), "personal", fakeslack.Options{NonMarketplace: true})
	id := b.intake(t, "k1")
	b.project(t)
	noErrors(t, b.work(t))
	root := oneRoot(t, b).TS
	const people, ours = 20, 10
	for i := range people + ours {
		m := fakeslack.Message{ThreadTS: root, Text: "a person's"}
		if i >= people {
			m = fakeslack.Message{ThreadTS: root, Text: "ours", BotID: b.fake.BotID(), User: b.fake.BotUserID()}
		}
		b.clock.Advance(time.Second)
		if _, err := b.fake.InjectMessage(channel, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.app.Commands.Erase(t.Context(), commands.Erase{Target: commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.admin}}); err != nil {
		t.Fatal(err)
	}
	b.project(t)
	runs := 0
	for len(b.roots()) > 0 && (len(b.roots()) != 1 || b.roots()[0].Subtype != "tombstone") {
		if runs++; runs > 10 {
			t.Fatalf("the thread was not deleted in 10 runs: %d replies left", len(b.roots()[0].Replies))
		}
		b.clock.Advance(2 * time.Minute) // past the cooldown and the rate-limit minute
		for _, j := range b.jobs(t) {
			_ = b.workJob(t.Context(), t, j)
		}
		b.project(t)
	}
	left := b.roots()
	if len(left) != 1 || len(left[0].Replies) != people {
		t.Fatalf("left %+v, want the root's tombstone with the %d replies people wrote", left, people)
	}
	for _, r := range left[0].Replies {
		if r.Text != "a person's" {
			t.Fatalf("a reply of ours was left: %+v", r)
		}
	}
	evs, err := b.app.Store.ReadStream(t.Context(), threads.Stream(b.tenant, id), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	deleted, progress := 0, 0
	for _, e := range evs {
		switch e.Type {
		case "SlackThreadDeleteProgress":
			progress++
		case "SlackThreadDeleted":
			deleted++
			var d threads.SlackThreadDeleted
			if err := json.Unmarshal(e.Data, &d); err != nil || d.Kept != people {
				t.Fatalf("SlackThreadDeleted = %+v (%v), want %d kept", d, err, people)
			}
		}
	}
	if deleted != 1 || progress == 0 {
		t.Fatalf("%d SlackThreadDeleted and %d progress events, want 1 and some", deleted, progress)
	}
}

// TestErasureDeletesRootWhosePostWasNotRecorded: the root was posted but the worker died before
// recording it (the post's outcome unknown to Casebook), then the inquiry is erased: the erasure
// looks the root up by its effect key and deletes it, so no message about the erased inquiry is
// left in Slack.
func TestErasureDeletesRootWhosePostWasNotRecorded(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		id := b.intake(t, "k1")
		b.project(t)
		j := b.jobs(t)[0]
		b.app.Threads.SetAfterPost(func() error { return errors.New("crash") })
		if err := b.workJob(t.Context(), t, j); err == nil {
			t.Fatal("crash not reported")
		}
		b.app.Threads.SetAfterPost(nil)
		oneRoot(t, b)
		if _, err := b.app.Commands.Erase(t.Context(), commands.Erase{Target: commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.admin}}); err != nil {
			t.Fatal(err)
		}
		b.project(t)
		for range 3 {
			b.clock.Advance(2 * time.Minute) // past the in-flight guard
			for _, j := range b.jobs(t) {
				_ = b.workJob(t.Context(), t, j)
			}
			b.project(t)
		}
		for _, m := range b.roots() {
			if m.Subtype != "tombstone" {
				t.Fatalf("a message of the erased inquiry is left in Slack: %s %q", m.TS, m.Text)
			}
		}
		if n := b.fake.CallCount("chat.postMessage"); n != 1 {
			t.Fatalf("chat.postMessage called %d times, want 1", n)
		}
	})
}
