package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
)

func admin() domain.Principal {
	return domain.Principal{ID: "adm", TenantID: "t1", Role: domain.RoleAdmin}
}

func viewer() domain.Principal {
	return domain.Principal{ID: "v", TenantID: "t1", Role: domain.RoleViewer}
}

func fold(t *testing.T, q *domain.Inquiry, evs []domain.Event, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		q.Apply(e, t0.Add(time.Hour))
	}
}

// TestArchiveRefusesEveryOperatorWrite: an archived inquiry refuses every operator write with
// ErrArchived (a 409 conflict), fires no due job and has no SLA clock; unarchive needs the role
// again and restores writes.
func TestArchiveRefusesEveryOperatorWrite(t *testing.T) {
	t.Parallel()
	op := operator("op1")
	q := at(t, domain.StatusInProgress)
	if _, err := q.Archive(viewer(), "done", time.Time{}, t0, ""); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer archive = %v", err)
	}
	if _, err := q.Archive(op, "  ", time.Time{}, t0, ""); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("archive without reason = %v", err)
	}
	if _, err := q.Archive(op, "done", t0.Add(-time.Hour), t0, ""); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("archive with a past deadline = %v", err)
	}
	gen := q.SLAGeneration
	evs, err := q.Archive(op, "done", t0.Add(90*24*time.Hour), t0, "default")
	fold(t, q, evs, err)
	if !q.Archived || q.SLAGeneration == gen || !q.RetainUntil.Equal(t0.Add(90*24*time.Hour)) {
		t.Fatalf("archived state = %+v", q)
	}
	writes := map[string]func() error{
		"transition": func() error { _, err := q.Transition(op, domain.StatusResolved, "", ""); return err },
		"claim":      func() error { _, err := q.Claim(op); return err },
		"assign":     func() error { _, err := q.Assign(op, op); return err },
		"note":       func() error { _, err := q.AddNote(op, "hi", t0); return err },
		"follow-up": func() error {
			_, err := q.ScheduleFollowUp(op, "j1", t0.Add(2*time.Hour), t0, "")
			return err
		},
		"due":     func() error { _, err := q.SetDueDate(op, t0.Add(2*time.Hour), t0); return err },
		"watcher": func() error { _, err := q.AddWatcher(op, op); return err },
		"route":   func() error { _, err := q.Route(admin(), "billing"); return err },
		"archive": func() error { _, err := q.Archive(op, "again", time.Time{}, t0, ""); return err },
	}
	for name, w := range writes {
		if err := w(); !errors.Is(err, domain.ErrArchived) || !errors.Is(err, domain.ErrConflict) {
			t.Errorf("%s on an archived inquiry = %v, want ErrArchived", name, err)
		}
	}
	if evs := q.FireDue(domain.DueJob{Kind: domain.KindSLABreach, Target: domain.TargetResolution, Generation: q.SLAGeneration}, nil); evs != nil {
		t.Fatalf("due job fired on an archived inquiry: %v", evs)
	}
	if _, err := q.Unarchive(viewer(), ""); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer unarchive = %v", err)
	}
	evs, err = q.Unarchive(op, "reopened by customer")
	fold(t, q, evs, err)
	if q.Archived {
		t.Fatal("still archived")
	}
	if _, err := q.AddNote(op, "hi", t0); err != nil {
		t.Fatalf("note after unarchive = %v", err)
	}
}

// TestLegalHoldBlocksErasure: holds and erasure are admin only; a held inquiry cannot be erased;
// an erased inquiry refuses every write and reads "[erased]" in each personal field.
func TestLegalHoldBlocksErasure(t *testing.T) {
	t.Parallel()
	op := operator("op1")
	q := at(t, domain.StatusResolved)
	if _, err := q.PlaceHold(op, "litigation"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("operator hold = %v", err)
	}
	if _, err := q.Erase(op, "request"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("operator erase = %v", err)
	}
	evs, err := q.PlaceHold(admin(), "litigation")
	fold(t, q, evs, err)
	if _, err := q.Erase(admin(), "request"); !errors.Is(err, domain.ErrLegalHold) {
		t.Fatalf("erase under hold = %v", err)
	}
	evs, err = q.ReleaseHold(admin(), "settled")
	fold(t, q, evs, err)
	evs, err = q.Erase(admin(), "request")
	fold(t, q, evs, err)
	if !q.Erased || q.Subject != domain.Erased || q.Message != domain.Erased || q.Requester.Email != domain.Erased || q.Receipt != "R1" {
		t.Fatalf("erased state = %+v", q)
	}
	if evs, err := q.Erase(admin(), "request"); err != nil || evs != nil {
		t.Fatalf("second erase = %v %v", evs, err)
	}
	if _, err := q.Transition(op, domain.StatusInProgress, "", ""); !errors.Is(err, domain.ErrErased) {
		t.Fatalf("reopen after erasure = %v", err)
	}
	if _, err := q.Unarchive(op, ""); !errors.Is(err, domain.ErrErased) {
		t.Fatalf("unarchive after erasure = %v", err)
	}
	if _, err := q.PlaceHold(admin(), "late"); !errors.Is(err, domain.ErrErased) {
		t.Fatalf("hold after erasure = %v", err)
	}
}

// TestRedactJSON: personal members read "[erased]", others stay, other types pass unchanged.
func TestRedactJSON(t *testing.T) {
	t.Parallel()
	got, err := domain.RedactJSON("FollowUpScheduled", []byte(`{"job_id":"j1","note":"call Ada"}`))
	if err != nil || string(got) != `{"job_id":"j1","note":"[erased]"}` {
		t.Fatalf("RedactJSON = %s %v", got, err)
	}
	in := []byte(`{"to":"resolved"}`)
	if got, _ := domain.RedactJSON("InquiryStatusChanged", in); string(got) != string(in) {
		t.Fatalf("other type changed: %s", got)
	}
}
