package callbacks_test

import (
	"errors"
	"net/url"
	"testing"

	"github.com/casebook/casebook/adapters/slack/callbacks"
)

func form(payload string) []byte { return []byte("payload=" + url.QueryEscape(payload)) }

func TestParseInteraction(t *testing.T) {
	t.Parallel()
	in, err := callbacks.ParseInteraction(form(`{"type":"block_actions","team":{"id":"T1"},"enterprise":{"id":"E1"},"api_app_id":"A1",
		"user":{"id":"U1"},"channel":{"id":"C1"},"message":{"ts":"1.000200","thread_ts":"1.000100"},"response_url":"https://hooks.slack.com/x",
		"actions":[{"action_id":"casebook_status","action_ts":"2.0","selected_option":{"value":"resolved"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.InstallKey() != "E1/T1/A1" || in.Channel != "C1" || in.RootTS != "1.000100" || in.Value != "resolved" || in.ActionTS != "2.0" {
		t.Fatalf("parsed %+v", in)
	}
	v, err := callbacks.ParseInteraction(form(`{"type":"view_submission","team":{"id":"T1"},"api_app_id":"A1","user":{"id":"U1"},
		"view":{"id":"V1","callback_id":"casebook_note_modal","private_metadata":"C1 1.000100",
		"state":{"values":{"note":{"note":{"type":"plain_text_input","value":"hello"}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Channel != "C1" || v.RootTS != "1.000100" || v.Inputs["note"] != "hello" || v.InstallKey() != "/T1/A1" {
		t.Fatalf("parsed %+v", v)
	}
	for _, bad := range []string{`{}`, `{"type":"block_actions","team":{"id":"T1"},"user":{"id":"U1"}}`, `[`, `{"type":"shortcut","team":{"id":"T"},"user":{"id":"U"}}`} {
		if _, err := callbacks.ParseInteraction(form(bad)); !errors.Is(err, callbacks.ErrMalformed) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

func TestParseEvent(t *testing.T) {
	t.Parallel()
	e, err := callbacks.ParseEvent([]byte(`{"type":"event_callback","team_id":"T1","api_app_id":"A1","event_id":"Ev1","event":{"type":"tokens_revoked","tokens":{"bot":["U0BOT"]}}}`))
	if err != nil || !e.BotTokensRevoked || e.InstallKey() != "/T1/A1" {
		t.Fatalf("%+v %v", e, err)
	}
	if _, err := callbacks.ParseEvent([]byte(`{"type":"event_callback","team_id":"T1"}`)); !errors.Is(err, callbacks.ErrMalformed) {
		t.Fatalf("event without id: %v", err)
	}
}

// FuzzParseInteraction: parsing never panics, and what it accepts is complete enough to act on.
func FuzzParseInteraction(f *testing.F) {
	f.Add(form(`{"type":"block_actions","team":{"id":"T1"},"api_app_id":"A1","user":{"id":"U1"},"channel":{"id":"C1"},"message":{"ts":"1.0"},"actions":[{"action_id":"casebook_claim","action_ts":"2.0","value":"CB-X"}]}`))
	f.Add(form(`{"type":"view_submission","team":{"id":"T1"},"user":{"id":"U1"},"view":{"id":"V","callback_id":"casebook_cancel_modal","private_metadata":"C1 1.0","state":{"values":{"reason":{"reason":{"value":"dup"}}}}}}`))
	f.Add([]byte("payload=%7B%22type%22%3A%22block_actions%22%2C%22actions%22%3A%5B%5D%7D"))
	f.Add([]byte("payload=%ZZ&payload=1"))
	f.Add([]byte(`{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":{"type":"app_uninstalled"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := callbacks.ParseInteraction(body)
		if err == nil && (in.TeamID == "" || in.UserID == "" || in.ActionID == "" ||
			(in.Type != "block_actions" && in.Type != "view_submission")) {
			t.Fatalf("accepted an incomplete payload: %+v", in)
		}
		if e, err := callbacks.ParseEvent(body); err == nil && e.Type != "url_verification" && e.EventID == "" {
			t.Fatalf("accepted an event without id: %+v", e)
		}
	})
}
