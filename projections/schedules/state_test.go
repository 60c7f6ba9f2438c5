package schedules

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
)

// everyField is an inquiry with no zero field, so that a field the stored state dropped or
// misnamed shows in the round trip.
func everyField(t *testing.T) domain.Inquiry {
	t.Helper()
	at := time.Date(2026, 12, 1, 9, 30, 0, 123456789, time.UTC)
	q := domain.Inquiry{
		ID: "inq-1", TenantID: "tenant-1", Source: domain.SourcePortal, Receipt: "CB-1",
		Requester: domain.Requester{Name: "Ada", Email: "ada@example.com", SlackUser: "U1"},
		Subject:   "Subject", Message: "Message", Category: "billing", SubmittedBy: "p-1", ExternalID: "ext-1",
		Permalink: "https://example.com/1", Status: domain.StatusWaiting, Priority: domain.PriorityHigh,
		Owner: "p-2", Team: "support", Version: 7, CreatedAt: at, UpdatedAt: at.Add(time.Hour),
		ClosedAt: at.Add(2 * time.Hour), DueAt: at.Add(48 * time.Hour),
		FollowUps:       map[string]domain.FollowUp{"job-1": {DueAt: at.Add(time.Minute), By: "p-2", Note: "call back"}},
		Watchers:        []domain.PrincipalID{"p-3"},
		EscalationLevel: 2, FirstRespondedAt: at.Add(time.Minute),
		Warnings:    map[string]time.Time{"resolution": at.Add(3 * time.Hour)},
		Breaches:    map[string]time.Time{"first_response": at.Add(4 * time.Hour)},
		Paused:      [][2]time.Time{{at.Add(5 * time.Minute), at.Add(6 * time.Minute)}},
		PausedSince: at.Add(7 * time.Minute), SLAGeneration: 3,
		Archived: true, ArchivedAt: at.Add(8 * time.Hour), RetainUntil: at.Add(9 * time.Hour),
		RetentionClass: "standard", Held: true, Erased: true, ErasedAt: at.Add(10 * time.Hour),
		NoteTimes: []time.Time{at.Add(11 * time.Minute)}, FollowUpTimes: []time.Time{at.Add(12 * time.Minute)},
	}
	v := reflect.ValueOf(q)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test inquiry leaves %s zero", v.Type().Field(i).Name)
		}
	}
	return q
}

// withoutPersonal is q as the stored state keeps it.
func withoutPersonal(q domain.Inquiry) domain.Inquiry {
	q.Requester, q.Subject, q.Message, q.ExternalID = domain.Requester{}, "", "", ""
	fs := make(map[string]domain.FollowUp, len(q.FollowUps))
	for id, f := range q.FollowUps {
		f.Note = ""
		fs[id] = f
	}
	q.FollowUps = fs
	return q
}

func TestClockStateRoundTrip(t *testing.T) {
	q := everyField(t)
	state, err := snapshot(&q)
	if err != nil {
		t.Fatal(err)
	}
	for _, personal := range []string{"Ada", "ada@example.com", "U1", "Message", "ext-1", "call back"} {
		if strings.Contains(state, personal) {
			t.Errorf("stored state holds %q: %s", personal, state)
		}
	}
	for _, k := range []string{"inq-1", "tenant-1"} {
		if strings.Contains(state, k) {
			t.Errorf("stored state repeats the row's key %q: %s", k, state)
		}
	}
	got, err := restore(key{tenant: q.TenantID, id: q.ID}, state)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(withoutPersonal(q), *got); diff != "" {
		t.Errorf("restored inquiry (-want +got):\n%s", diff)
	}
}

// A new inquiry's state holds what it has, not its zero fields.
func TestClockStateOmitsZeroFields(t *testing.T) {
	at := time.Date(2026, 12, 1, 13, 2, 40, 231580538, time.UTC)
	var q domain.Inquiry
	q.Apply(domain.InquiryReceived{InquiryID: "eeeaa980-6b66-80c3-99a4-f8510720c3ae", TenantID: "c23888ea-634e-45ce-b6bd-63b0aeb999b7",
		Source: domain.SourcePublicForm, Receipt: "CB-QRRT5PYEX3RIZV3C", Priority: domain.PriorityNormal,
		Requester: domain.Requester{Name: "Bench 1", Email: "bench1@example.com"}, Subject: "Bench", Message: "Load test 1"}, at)
	q.Version = 1
	state, err := snapshot(&q)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Source":"public_form","Receipt":"CB-QRRT5PYEX3RIZV3C","Status":"new","Priority":"normal","Version":1,` +
		`"CreatedAt":"2026-12-01T13:02:40.231580538Z","UpdatedAt":"2026-12-01T13:02:40.231580538Z"}`
	if state != want {
		t.Errorf("stored state\n got %s\nwant %s", state, want)
	}
}

// A state stored with every field, zero or not, decodes to the same inquiry.
func TestClockStateReadsTheFullForm(t *testing.T) {
	full := `{"ID":"eeeaa980-6b66-80c3-99a4-f8510720c3ae","TenantID":"c23888ea-634e-45ce-b6bd-63b0aeb999b7","Source":"public_form",` +
		`"Receipt":"CB-QRRT5PYEX3RIZV3C","Requester":{"name":"","email":""},"Subject":"","Message":"","Category":"","SubmittedBy":"",` +
		`"ExternalID":"","Permalink":"","Status":"new","Priority":"normal","Owner":"","Team":"","Version":1,` +
		`"CreatedAt":"2026-12-01T13:02:40.231580538Z","UpdatedAt":"2026-12-01T13:02:40.231580538Z","ClosedAt":"0001-01-01T00:00:00Z",` +
		`"DueAt":"0001-01-01T00:00:00Z","FollowUps":null,"Watchers":null,"EscalationLevel":0,"FirstRespondedAt":"0001-01-01T00:00:00Z",` +
		`"Warnings":null,"Breaches":null,"Paused":null,"PausedSince":"0001-01-01T00:00:00Z","SLAGeneration":0,"Archived":false,` +
		`"ArchivedAt":"0001-01-01T00:00:00Z","RetainUntil":"0001-01-01T00:00:00Z","RetentionClass":"","Held":false,"Erased":false,` +
		`"ErasedAt":"0001-01-01T00:00:00Z"}`
	k := key{tenant: "c23888ea-634e-45ce-b6bd-63b0aeb999b7", id: "eeeaa980-6b66-80c3-99a4-f8510720c3ae"}
	old, err := restore(k, full)
	if err != nil {
		t.Fatal(err)
	}
	compact, err := snapshot(old)
	if err != nil {
		t.Fatal(err)
	}
	got, err := restore(k, compact)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(old, got); diff != "" {
		t.Errorf("full and compact forms differ (-full +compact):\n%s", diff)
	}
	if len(compact) >= len(full)/3 {
		t.Errorf("compact state is %d bytes, the full form %d", len(compact), len(full))
	}
}
