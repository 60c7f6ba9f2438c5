package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
)

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

func operator(id string) domain.Principal {
	return domain.Principal{ID: domain.PrincipalID(id), TenantID: "t1", Role: domain.RoleOperator, Team: "support"}
}

// at folds a received inquiry through the events that lead to status s.
func at(t *testing.T, s domain.Status) *domain.Inquiry {
	t.Helper()
	evs, err := domain.Receive(domain.NewInquiry{
		ID: "i1", TenantID: "t1", Source: domain.SourcePublicForm, Receipt: "R1",
		Requester: domain.Requester{Name: "Ada", Email: "ada@example.com"}, Subject: "Help", Message: "Hi",
	})
	if err != nil {
		t.Fatal(err)
	}
	q := &domain.Inquiry{}
	for _, e := range evs {
		q.Apply(e, t0)
	}
	path := map[domain.Status][]domain.Status{
		domain.StatusNew:        nil,
		domain.StatusTriaged:    {domain.StatusTriaged},
		domain.StatusInProgress: {domain.StatusTriaged, domain.StatusInProgress},
		domain.StatusWaiting:    {domain.StatusTriaged, domain.StatusInProgress, domain.StatusWaiting},
		domain.StatusResolved:   {domain.StatusTriaged, domain.StatusInProgress, domain.StatusResolved},
		domain.StatusCancelled:  {domain.StatusCancelled},
	}[s]
	for _, to := range path {
		evs, err := q.Transition(operator("p1"), to, "because", "")
		if err != nil {
			t.Fatalf("path to %s: %v", s, err)
		}
		for _, e := range evs {
			q.Apply(e, t0)
		}
	}
	if q.Status != s {
		t.Fatalf("status = %s, want %s", q.Status, s)
	}
	return q
}

// TestLifecycleGraph checks every ordered pair of states: allowed edges succeed and land on the
// target, every other pair is an ErrInvalidTransition.
func TestLifecycleGraph(t *testing.T) {
	t.Parallel()
	allowed := map[[2]domain.Status]bool{
		{domain.StatusNew, domain.StatusTriaged}:          true,
		{domain.StatusNew, domain.StatusCancelled}:        true,
		{domain.StatusTriaged, domain.StatusInProgress}:   true,
		{domain.StatusTriaged, domain.StatusCancelled}:    true,
		{domain.StatusInProgress, domain.StatusWaiting}:   true,
		{domain.StatusInProgress, domain.StatusResolved}:  true,
		{domain.StatusInProgress, domain.StatusCancelled}: true,
		{domain.StatusWaiting, domain.StatusInProgress}:   true,
		{domain.StatusWaiting, domain.StatusResolved}:     true,
		{domain.StatusWaiting, domain.StatusCancelled}:    true,
		{domain.StatusResolved, domain.StatusInProgress}:  true,
	}
	for _, from := range domain.Statuses {
		for _, to := range domain.Statuses {
			t.Run(string(from)+"->"+string(to), func(t *testing.T) {
				t.Parallel()
				q := at(t, from)
				evs, err := q.Transition(operator("p1"), to, "a reason", "")
				if !allowed[[2]domain.Status{from, to}] {
					var te *domain.TransitionError
					if !errors.Is(err, domain.ErrInvalidTransition) || !errors.As(err, &te) || te.From != from || te.To != to {
						t.Fatalf("err = %v, want TransitionError %s->%s", err, from, to)
					}
					return
				}
				if err != nil {
					t.Fatalf("allowed edge refused: %v", err)
				}
				for _, e := range evs {
					q.Apply(e, t0.Add(time.Hour))
				}
				if q.Status != to {
					t.Fatalf("status = %s, want %s", q.Status, to)
				}
				if to.Terminal() != !q.ClosedAt.IsZero() {
					t.Fatalf("closed_at = %v for %s", q.ClosedAt, to)
				}
			})
		}
	}
}

func TestReasonRequired(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from, to domain.Status
		need     bool
	}{
		{domain.StatusInProgress, domain.StatusWaiting, true},
		{domain.StatusNew, domain.StatusCancelled, true},
		{domain.StatusWaiting, domain.StatusCancelled, true},
		{domain.StatusNew, domain.StatusTriaged, false},
		{domain.StatusInProgress, domain.StatusResolved, false},
		{domain.StatusResolved, domain.StatusInProgress, false},
	}
	for _, tt := range tests {
		q := at(t, tt.from)
		_, err := q.Transition(operator("p1"), tt.to, "  ", "")
		var ve *domain.ValidationError
		if tt.need != errors.As(err, &ve) {
			t.Errorf("%s->%s without reason: err = %v, need reason %v", tt.from, tt.to, err, tt.need)
		}
		if tt.need && ve.Field != "reason" {
			t.Errorf("field = %q", ve.Field)
		}
	}
}

func TestTriageSetsPriority(t *testing.T) {
	t.Parallel()
	q := at(t, domain.StatusNew)
	evs, err := q.Transition(operator("p1"), domain.StatusTriaged, "", domain.PriorityUrgent)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]domain.Event{domain.InquiryTriaged{Priority: domain.PriorityUrgent}}, evs); diff != "" {
		t.Fatal(diff)
	}
	q2 := at(t, domain.StatusTriaged)
	if _, err := q2.Transition(operator("p1"), domain.StatusInProgress, "", domain.PriorityHigh); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("priority off triage: err = %v", err)
	}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	q := at(t, domain.StatusTriaged)
	evs, err := q.Claim(operator("p1"))
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.Event{
		domain.InquiryAssigned{Owner: "p1", Team: "support"},
		domain.InquiryStatusChanged{From: domain.StatusTriaged, To: domain.StatusInProgress},
	}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Fatal(diff)
	}
	for _, e := range evs {
		q.Apply(e, t0)
	}
	if evs, err := q.Claim(operator("p1")); err != nil || len(evs) != 0 {
		t.Fatalf("re-claim by owner: %v %v", evs, err)
	}
	_, err = q.Claim(operator("p2"))
	var ce *domain.ClaimedError
	if !errors.As(err, &ce) || ce.Owner != "p1" {
		t.Fatalf("claim by other: %v", err)
	}
	if _, err := at(t, domain.StatusCancelled).Claim(operator("p1")); !errors.Is(err, domain.ErrInvalidTransition) {
		t.Fatalf("claim cancelled: %v", err)
	}
}

func TestRolePolicy(t *testing.T) {
	t.Parallel()
	viewer := domain.Principal{ID: "v", TenantID: "t1", Role: domain.RoleViewer}
	q := at(t, domain.StatusNew)
	if _, err := q.Transition(viewer, domain.StatusTriaged, "", ""); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("viewer triage: %v", err)
	}
	if _, err := q.Claim(viewer); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("viewer claim: %v", err)
	}
	if _, err := q.AddNote(viewer, "x", t0); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("viewer note: %v", err)
	}
	if _, err := q.Assign(viewer, operator("p1")); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("viewer assign: %v", err)
	}
	other := domain.Principal{ID: "p9", TenantID: "t1", Role: domain.RoleOperator, Team: "billing"}
	if _, err := q.Assign(operator("p1"), other); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("operator assigns across teams: %v", err)
	}
	admin := domain.Principal{ID: "a", TenantID: "t1", Role: domain.RoleAdmin}
	if _, err := q.Assign(admin, other); err != nil {
		t.Errorf("admin assigns across teams: %v", err)
	}
	foreign := domain.Principal{ID: "x", TenantID: "t2", Role: domain.RoleOperator, Team: "support"}
	if _, err := q.Assign(admin, foreign); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("assign to another tenant's principal: %v", err)
	}
	if _, err := q.Assign(admin, viewer); !errors.Is(err, domain.ErrValidation) {
		t.Errorf("assign to viewer: %v", err)
	}
}

func TestReceiveValidation(t *testing.T) {
	t.Parallel()
	base := domain.NewInquiry{
		ID: "i1", TenantID: "t1", Source: domain.SourcePublicForm, Receipt: "R1",
		Requester: domain.Requester{Name: "Ada", Email: "ada@example.com"}, Subject: "Help", Message: "Hi",
	}
	long := func(n int) string {
		b := make([]rune, n)
		for i := range b {
			b[i] = 'x'
		}
		return string(b)
	}
	tests := []struct {
		name  string
		edit  func(*domain.NewInquiry)
		field string
	}{
		{"ok", func(*domain.NewInquiry) {}, ""},
		{"no email", func(n *domain.NewInquiry) { n.Requester.Email = "" }, "email"},
		{"bad email", func(n *domain.NewInquiry) { n.Requester.Email = "Ada <ada@example.com>" }, "email"},
		{"no subject", func(n *domain.NewInquiry) { n.Subject = " " }, "subject"},
		{"long subject", func(n *domain.NewInquiry) { n.Subject = long(domain.MaxSubjectLen + 1) }, "subject"},
		{"max subject", func(n *domain.NewInquiry) { n.Subject = long(domain.MaxSubjectLen) }, ""},
		{"no message", func(n *domain.NewInquiry) { n.Message = "" }, "message"},
		{"bad utf8", func(n *domain.NewInquiry) { n.Message = "\xff" }, "message"},
		{"bad category", func(n *domain.NewInquiry) { n.Category = "Billing!" }, "category"},
		{"bad source", func(n *domain.NewInquiry) { n.Source = "fax" }, "source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := base
			tt.edit(&n)
			_, err := domain.Receive(n)
			var ve *domain.ValidationError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.field != "" && (!errors.As(err, &ve) || ve.Field != tt.field):
				t.Fatalf("err = %v, want validation error on %s", err, tt.field)
			}
		})
	}
}

func TestEventCodecRoundTrip(t *testing.T) {
	t.Parallel()
	evs := []domain.Event{
		domain.InquiryReceived{InquiryID: "i", TenantID: "t", Source: domain.SourceAPI, Receipt: "R", Requester: domain.Requester{Name: "n", Email: "e@x.io"}, Subject: "s", Message: "m", Priority: domain.PriorityNormal},
		domain.InquiryTriaged{Priority: domain.PriorityHigh},
		domain.InquiryStatusChanged{From: domain.StatusNew, To: domain.StatusCancelled, Reason: "spam"},
		domain.InquiryAssigned{Owner: "p", Previous: "q", Team: "x"},
		domain.NoteAdded{Body: "b"},
	}
	for _, e := range evs {
		typ, b, err := domain.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := domain.Decode(typ, domain.SchemaVersion, b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("%s: %s", typ, diff)
		}
	}
	if _, err := domain.Decode("Nope", 1, []byte(`{}`)); err == nil {
		t.Error("unknown type decoded")
	}
	if _, err := domain.Decode("NoteAdded", domain.SchemaVersion+1, []byte(`{}`)); err == nil {
		t.Error("future schema decoded")
	}
}

// TestEventTypesDecode: every listed type decodes to an event of that type, and Encode round-trips it.
func TestEventTypesDecode(t *testing.T) {
	t.Parallel()
	types := domain.EventTypes()
	if len(types) < 5 {
		t.Fatalf("EventTypes = %v", types)
	}
	for _, typ := range types {
		e, err := domain.Decode(typ, domain.SchemaVersion, []byte("{}"))
		if err != nil || e.EventType() != typ {
			t.Fatalf("Decode(%s) = %T %v", typ, e, err)
		}
		if got, _, err := domain.Encode(e); err != nil || got != typ {
			t.Fatalf("Encode(%T) = %s %v", e, got, err)
		}
	}
	if _, err := domain.Decode("NoSuchEvent", domain.SchemaVersion, []byte("{}")); err == nil {
		t.Fatal("an unknown type decoded")
	}
}

// TestDisabledPrincipal: a disabled principal is allowed nothing, whatever its role
// (ErrPrincipalDisabled, a kind of ErrForbidden), and cannot be made an owner or a watcher.
func TestDisabledPrincipal(t *testing.T) {
	t.Parallel()
	q := at(t, domain.StatusNew)
	admin := domain.Principal{ID: "a", TenantID: "t1", Role: domain.RoleAdmin}
	gone := domain.Principal{ID: "a2", TenantID: "t1", Role: domain.RoleAdmin, Disabled: true}
	for _, act := range []domain.Action{domain.ActRead, domain.ActClaim, domain.ActAdminister, domain.ActSubmit} {
		if err := domain.Authorize(gone, act); !errors.Is(err, domain.ErrPrincipalDisabled) || !errors.Is(err, domain.ErrForbidden) {
			t.Errorf("disabled admin %s: %v", act, err)
		}
	}
	if _, err := q.Claim(gone); !errors.Is(err, domain.ErrPrincipalDisabled) {
		t.Errorf("disabled claim: %v", err)
	}
	var ve *domain.ValidationError
	if _, err := q.Assign(admin, gone); !errors.As(err, &ve) || ve.Reason != "is disabled" {
		t.Errorf("assign to a disabled principal: %v", err)
	}
	if _, err := q.AddWatcher(admin, gone); !errors.As(err, &ve) || ve.Reason != "is disabled" {
		t.Errorf("a disabled watcher: %v", err)
	}
}
