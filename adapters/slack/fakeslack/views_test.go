package fakeslack_test

import (
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
)

// TestViewsOpenOncePerTrigger: a view opens with an issued trigger id, once, within the TTL;
// an unknown id is invalid_trigger_id, a reused one exchanged_trigger_id, one older than
// TriggerTTL on the fake's clock expired_trigger_id (exactly TriggerTTL old still opens).
func TestViewsOpenOncePerTrigger(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	modal := slack.ModalViewRequest{Type: slack.VTModal, CallbackID: "cb_modal", PrivateMetadata: "C1 1.2",
		Title:  slack.NewTextBlockObject(slack.PlainTextType, "Title", false, false),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, "Hello", false, false), nil, nil)}}}
	trig := b.srv.IssueTrigger()
	res, err := b.api.OpenViewContext(t.Context(), trig, modal)
	if err != nil || res.ID == "" || res.CallbackID != "cb_modal" {
		t.Fatalf("open = %+v, %v", res, err)
	}
	if _, err := b.api.OpenViewContext(t.Context(), trig, modal); slackCode(err) != fakeslack.CodeExchangedTriggerID {
		t.Fatalf("reused trigger = %v", err)
	}
	if _, err := b.api.OpenViewContext(t.Context(), "123.456.never-issued", modal); slackCode(err) != fakeslack.CodeInvalidTriggerID {
		t.Fatalf("unknown trigger = %v", err)
	}
	old := b.srv.IssueTrigger()
	b.clock.Advance(fakeslack.TriggerTTL + time.Millisecond)
	if _, err := b.api.OpenViewContext(t.Context(), old, modal); slackCode(err) != fakeslack.CodeExpiredTriggerID {
		t.Fatalf("old trigger = %v", err)
	}
	edge := b.srv.IssueTrigger()
	b.clock.Advance(fakeslack.TriggerTTL)
	if _, err := b.api.OpenViewContext(t.Context(), edge, modal); err != nil {
		t.Fatalf("trigger exactly TriggerTTL old = %v", err)
	}
	views := b.srv.Views()
	if len(views) != 2 || views[0].TriggerID != trig || views[0].CallbackID != "cb_modal" || views[0].PrivateMetadata != "C1 1.2" || views[0].Title != "Title" {
		t.Fatalf("views = %+v", views)
	}
	if n := b.srv.CallCount("views.open"); n != 5 {
		t.Fatalf("%d views.open calls", n)
	}
}
