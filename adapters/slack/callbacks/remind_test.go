package callbacks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// remindSubmit is a view_submission of the Remind me modal: the radio choice, and the
// datetimepicker's Unix seconds when at is not zero.
func remindSubmit(user, ts, viewID, when string, at time.Time, note string) string {
	values := map[string]map[string]any{
		callbacks.InputWhen:   {callbacks.InputWhen: map[string]any{"type": "radio_buttons", "selected_option": map[string]any{"value": when}}},
		callbacks.InputRemind: {callbacks.InputRemind: map[string]any{"type": "plain_text_input", "value": note}},
	}
	picker := map[string]any{"type": "datetimepicker", "selected_date_time": nil}
	if !at.IsZero() {
		picker["selected_date_time"] = at.Unix()
	}
	values[callbacks.InputAt] = map[string]any{callbacks.InputAt: picker}
	state, _ := json.Marshal(map[string]any{"values": values})
	return fmt.Sprintf(`{"type":"view_submission","team":{"id":%q},"api_app_id":%q,"user":{"id":%q},
		"view":{"id":%q,"callback_id":%q,"private_metadata":"%s %s","state":%s}}`,
		team, appID, user, viewID, callbacks.ModalRemind, channel, ts, state)
}

// TestRemindMeButtonSchedulesFollowUp: the root carries a Remind me button; a click opens the
// modal through views.open with the trigger id Slack issued (naming the tenant's time zone);
// submitting "tomorrow 9:00" schedules a follow-up for 9:00 in that zone through the follow-up
// command, as the clicking user's principal, once per modal (a repeated delivery replays); "in 1
// hour" and a chosen date and time work too; a custom choice without a time, or one in the past,
// is refused in the modal naming the date field.
func TestRemindMeButtonSchedulesFollowUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	admin, _, err := b.app.Tenancy.CreatePrincipal(ctx, "acme", "Ann", domain.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.app.Commands.SetSLAPolicy(ctx, commands.SetSLAPolicy{Tenant: b.tenant, Actor: admin,
		Policy: []byte(`{"time_zone":"Europe/Berlin","targets":{"high":{"first_response":"1h"}}}`)}); err != nil {
		t.Fatal(err)
	}
	id, ts := b.posted(t, "k1")
	root, _ := b.fake.Message(channel, ts)
	if !strings.Contains(string(root.Blocks), callbacks.ActionRemind) {
		t.Fatalf("root has no Remind me button: %s", root.Blocks)
	}
	trig := b.fake.IssueTrigger()
	if rec := b.interact(t, clickTrigger(team, "U0OLGA0001", ts, callbacks.ActionRemind, "1793523600.000001", trig, b.respURL)); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("click = %d %s", rec.Code, rec.Body)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	views, err := b.fake.WaitViews(wctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	v := views[0]
	if v.TriggerID != trig || v.CallbackID != callbacks.ModalRemind || v.PrivateMetadata != channel+" "+ts {
		t.Fatalf("view = %+v", v)
	}
	for _, want := range []string{"Europe/Berlin", "radio_buttons", "datetimepicker", callbacks.WhenTomorrow, callbacks.WhenCustom} {
		if !strings.Contains(string(v.Blocks), want) {
			t.Errorf("modal lacks %q: %s", want, v.Blocks)
		}
	}
	ok := func(payload string) {
		t.Helper()
		if rec := b.interact(t, payload); rec.Code != 200 || rec.Body.Len() != 0 {
			t.Fatalf("submission = %d %s", rec.Code, rec.Body)
		}
	}
	refused := func(payload, field string) {
		t.Helper()
		rec := b.interact(t, payload)
		var answer struct {
			Action string            `json:"response_action"`
			Errors map[string]string `json:"errors"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Action != "errors" || answer.Errors[field] == "" {
			t.Fatalf("want a refusal on %s, got %d %s", field, rec.Code, rec.Body)
		}
	}
	// The harness clock stands at Sunday 1 Nov 2026, 09:00 UTC (10:00 in Berlin).
	ok(remindSubmit("U0OLGA0001", ts, v.ID, callbacks.WhenTomorrow, time.Time{}, "call back"))
	ok(remindSubmit("U0OLGA0001", ts, v.ID, callbacks.WhenTomorrow, time.Time{}, "call back")) // a repeated delivery
	berlin, _ := time.LoadLocation("Europe/Berlin")
	tomorrow9 := time.Date(2026, 11, 2, 9, 0, 0, 0, berlin)
	q := b.inquiry(t, id)
	if len(q.FollowUps) != 1 {
		t.Fatalf("%d follow-ups after one modal, want 1", len(q.FollowUps))
	}
	for _, f := range q.FollowUps {
		if !f.DueAt.Equal(tomorrow9) || f.By != b.olga.ID || f.Note != "call back" {
			t.Fatalf("follow-up = %+v, want tomorrow 9:00 Berlin (%s) by Olga", f, tomorrow9.UTC())
		}
	}
	refused(remindSubmit("U0OLGA0001", ts, v.ID+"b", callbacks.WhenCustom, time.Time{}, ""), callbacks.InputAt)
	refused(remindSubmit("U0OLGA0001", ts, v.ID+"c", callbacks.WhenCustom, b.clock.Now().Add(-time.Hour), ""), callbacks.InputAt)
	refused(remindSubmit("U0OLGA0001", ts, v.ID+"d", "", time.Time{}, ""), callbacks.InputWhen)
	custom := b.clock.Now().Add(3 * 24 * time.Hour).Truncate(time.Minute)
	ok(remindSubmit("U0OLGA0001", ts, v.ID+"e", callbacks.WhenCustom, custom, ""))
	ok(remindSubmit("U0BOB00001", ts, v.ID+"f", callbacks.WhenInHour, time.Time{}, ""))
	var due []string
	for _, f := range b.inquiry(t, id).FollowUps {
		due = append(due, f.DueAt.UTC().Format(time.RFC3339)+" "+string(f.By))
	}
	for _, want := range []string{custom.UTC().Format(time.RFC3339) + " " + string(b.olga.ID), b.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339) + " " + string(b.bob.ID)} {
		if !strings.Contains(strings.Join(due, "\n"), want) {
			t.Errorf("follow-ups %v lack %q", due, want)
		}
	}
	if len(due) != 3 {
		t.Fatalf("%d follow-ups, want 3: %v", len(due), due)
	}
}
