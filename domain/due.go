package domain

import (
	"slices"
	"strings"
	"time"
)

// Due-job kinds: what a durable due job does when its time comes.
const (
	KindFollowUp   = "follow_up"
	KindSLAWarning = "sla_warning"
	KindSLABreach  = "sla_breach"
	KindEscalation = "escalation"
)

// DueKinds lists every due-job kind.
var DueKinds = []string{KindFollowUp, KindSLAWarning, KindSLABreach, KindEscalation}

// Limits of the follow-up and watcher commands.
const (
	MaxFollowUpNoteLen = 1000
	MaxPendingFollowUp = 20
	MaxWatchers        = 50
	MaxTeamLen         = 64
	// MaxScheduleAhead bounds how far ahead a follow-up or due date may be set.
	MaxScheduleAhead = 366 * 24 * time.Hour
)

// FollowUpScheduled records a reminder due at DueAt. JobID is the due job's deterministic id.
type FollowUpScheduled struct {
	JobID string      `json:"job_id"`
	DueAt time.Time   `json:"due_at"`
	By    PrincipalID `json:"by"`
	Note  string      `json:"note,omitempty"`
}

// FollowUpCancelled withdraws a pending reminder.
type FollowUpCancelled struct {
	JobID string `json:"job_id"`
}

// DueDateSet records the date the inquiry is promised for; a zero DueAt clears it.
type DueDateSet struct {
	DueAt time.Time `json:"due_at,omitzero"`
}

// WatcherAdded records a principal who is reminded along with the owner.
type WatcherAdded struct {
	Principal PrincipalID `json:"principal"`
}

// InquiryRouted makes Team responsible for the inquiry (routing an unassigned one).
type InquiryRouted struct {
	Team     string `json:"team"`
	Previous string `json:"previous,omitempty"`
}

// FollowUpDue records that a reminder fell due; Recipients are the principals it is for, as
// authorized when it fired.
type FollowUpDue struct {
	JobID      string        `json:"job_id"`
	DueAt      time.Time     `json:"due_at"`
	Recipients []PrincipalID `json:"recipients,omitempty"`
}

// SLAWarning records that a target's due time is near.
type SLAWarning struct {
	Target string    `json:"target"`
	DueAt  time.Time `json:"due_at"`
}

// SLABreached records that a target's due time passed without it being met.
type SLABreached struct {
	Target string    `json:"target"`
	DueAt  time.Time `json:"due_at"`
}

// InquiryEscalated raises the inquiry's escalation level.
type InquiryEscalated struct {
	Level  int    `json:"level"`
	Target string `json:"target,omitempty"`
	Reason string `json:"reason"`
}

// EventType implementations.
func (FollowUpScheduled) EventType() string { return "FollowUpScheduled" }
func (FollowUpCancelled) EventType() string { return "FollowUpCancelled" }
func (DueDateSet) EventType() string        { return "DueDateSet" }
func (WatcherAdded) EventType() string      { return "WatcherAdded" }
func (InquiryRouted) EventType() string     { return "InquiryRouted" }
func (FollowUpDue) EventType() string       { return "FollowUpDue" }
func (SLAWarning) EventType() string        { return "SLAWarning" }
func (SLABreached) EventType() string       { return "SLABreached" }
func (InquiryEscalated) EventType() string  { return "InquiryEscalated" }

// FollowUp is a pending reminder of an inquiry.
type FollowUp struct {
	DueAt time.Time
	By    PrincipalID
	Note  string
}

// NextFollowUpAt is the earliest pending reminder's due time (zero: none).
func (q *Inquiry) NextFollowUpAt() time.Time {
	var next time.Time
	for _, f := range q.FollowUps {
		if next.IsZero() || f.DueAt.Before(next) {
			next = f.DueAt
		}
	}
	return next
}

// Breached lists the SLA targets that were breached, in name order.
func (q *Inquiry) Breached() []string {
	out := make([]string, 0, len(q.Breaches))
	for t := range q.Breaches {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// applyDue folds the events of this file and keeps the SLA facts of the lifecycle events.
func (q *Inquiry) applyDue(e Event, at time.Time) {
	switch e := e.(type) {
	case FollowUpScheduled:
		if q.FollowUps == nil {
			q.FollowUps = map[string]FollowUp{}
		}
		q.FollowUps[e.JobID] = FollowUp{DueAt: e.DueAt, By: e.By, Note: e.Note}
	case FollowUpCancelled:
		delete(q.FollowUps, e.JobID)
	case FollowUpDue:
		delete(q.FollowUps, e.JobID)
	case DueDateSet:
		q.DueAt = e.DueAt
	case WatcherAdded:
		if !slices.Contains(q.Watchers, e.Principal) {
			q.Watchers = append(q.Watchers, e.Principal)
		}
	case InquiryRouted:
		q.Team = e.Team
	case SLAWarning:
		if q.Warnings == nil {
			q.Warnings = map[string]time.Time{}
		}
		q.Warnings[e.Target] = e.DueAt
	case SLABreached:
		if q.Breaches == nil {
			q.Breaches = map[string]time.Time{}
		}
		q.Breaches[e.Target] = e.DueAt
	case InquiryEscalated:
		q.EscalationLevel = max(q.EscalationLevel, e.Level)
	case InquiryTriaged, InquiryAssigned, NoteAdded:
		q.responded(at)
	case InquiryStatusChanged:
		q.responded(at)
		q.SLAGeneration++
		stops := func(s Status) bool { return s == StatusWaiting || s.Terminal() }
		switch {
		case stops(e.To) && q.PausedSince.IsZero():
			q.PausedSince = at
		case !stops(e.To) && !q.PausedSince.IsZero():
			q.Paused = append(q.Paused, [2]time.Time{q.PausedSince, at})
			q.PausedSince = time.Time{}
		}
		if e.To.Terminal() {
			q.FollowUps = nil // a closed inquiry has nothing to be reminded of; reopening restores none
		}
	}
	if _, ok := e.(InquiryTriaged); ok {
		q.SLAGeneration++ // the priority, and with it the targets, may have changed
	}
}

// responded records the first operator action on the inquiry (the first-response target).
// Housekeeping (watchers, follow-ups, due dates, routing) is not a response.
func (q *Inquiry) responded(at time.Time) {
	if q.FirstRespondedAt.IsZero() {
		q.FirstRespondedAt = at
		q.SLAGeneration++
	}
}

// ActSchedule is scheduling follow-ups, due dates and watchers.
const ActSchedule Action = "schedule"

// ScheduleFollowUp decides a reminder at at, at least MinFollowUpDelay after now, the decision's
// time (MaxFollowUpsPerHour).
func (q *Inquiry) ScheduleFollowUp(actor Principal, jobID string, at, now time.Time, note string) ([]Event, error) {
	if err := Authorize(actor, ActSchedule); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	if q.Status.Terminal() {
		return nil, &TransitionError{From: q.Status, To: q.Status}
	}
	if err := checkFuture("at", at, now); err != nil {
		return nil, err
	}
	note = strings.TrimSpace(note)
	if err := checkText("note", note, false, MaxFollowUpNoteLen); err != nil {
		return nil, err
	}
	if jobID == "" {
		return nil, Invalid("job_id", "is required")
	}
	if _, ok := q.FollowUps[jobID]; ok {
		return nil, nil
	}
	if at.Sub(now) < MinFollowUpDelay {
		return nil, Invalid("at", "must be at least %s from now", plainDuration(MinFollowUpDelay))
	}
	if err := checkRate("follow-ups", q.FollowUpTimes, MaxFollowUpsPerHour, now); err != nil {
		return nil, err
	}
	if len(q.FollowUps) >= MaxPendingFollowUp {
		return nil, Invalid("at", "an inquiry has at most %d pending follow-ups", MaxPendingFollowUp)
	}
	return []Event{FollowUpScheduled{JobID: jobID, DueAt: at.UTC(), By: actor.ID, Note: note}}, nil
}

// CancelFollowUp withdraws a pending reminder; an unknown (or already fired) one is ErrNotFound.
func (q *Inquiry) CancelFollowUp(actor Principal, jobID string) ([]Event, error) {
	if err := Authorize(actor, ActSchedule); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	if _, ok := q.FollowUps[jobID]; !ok {
		return nil, ErrNotFound
	}
	return []Event{FollowUpCancelled{JobID: jobID}}, nil
}

// SetDueDate decides the inquiry's due date; a zero at clears it.
func (q *Inquiry) SetDueDate(actor Principal, at, now time.Time) ([]Event, error) {
	if err := Authorize(actor, ActSchedule); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	if q.Status.Terminal() {
		return nil, &TransitionError{From: q.Status, To: q.Status}
	}
	if !at.IsZero() {
		if err := checkFuture("due_at", at, now); err != nil {
			return nil, err
		}
		at = at.UTC()
	}
	if q.DueAt.Equal(at) {
		return nil, nil
	}
	return []Event{DueDateSet{DueAt: at}}, nil
}

// AddWatcher adds a watcher, who must be a principal of the inquiry's tenant allowed to read it.
func (q *Inquiry) AddWatcher(actor, watcher Principal) ([]Event, error) {
	if err := Authorize(actor, ActSchedule); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	if watcher.TenantID != q.TenantID || watcher.ID == "" {
		return nil, Invalid("principal", "is not a principal of this tenant")
	}
	if watcher.Disabled {
		return nil, Invalid("principal", "is disabled")
	}
	if Authorize(watcher, ActRead) != nil {
		return nil, Invalid("principal", "an integration cannot watch inquiries")
	}
	if slices.Contains(q.Watchers, watcher.ID) {
		return nil, nil
	}
	if len(q.Watchers) >= MaxWatchers {
		return nil, Invalid("principal", "an inquiry has at most %d watchers", MaxWatchers)
	}
	return []Event{WatcherAdded{Principal: watcher.ID}}, nil
}

// Route makes team responsible. Operators route only unowned inquiries (an owned one follows its
// owner's assignment); admins route any open inquiry.
func (q *Inquiry) Route(actor Principal, team string) ([]Event, error) {
	if err := Authorize(actor, ActAssign); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	if team == "" || len(team) > MaxTeamLen || checkCategory(team) != nil {
		return nil, Invalid("team", "must be a lowercase slug of at most %d characters", MaxTeamLen)
	}
	if q.Status.Terminal() {
		return nil, &TransitionError{From: q.Status, To: q.Status}
	}
	if q.Owner != "" && actor.Role != RoleAdmin {
		return nil, ErrForbidden
	}
	if q.Team == team {
		return nil, nil
	}
	return []Event{InquiryRouted{Team: team, Previous: q.Team}}, nil
}

func checkFuture(field string, at, now time.Time) error {
	if at.IsZero() {
		return Invalid(field, "is required")
	}
	if !at.After(now) {
		return Invalid(field, "must be in the future")
	}
	if at.Sub(now) > MaxScheduleAhead {
		return Invalid(field, "must be within %s", MaxScheduleAhead)
	}
	return nil
}

// DueJob is what a due job asks of the inquiry when it fires. Generation is the inquiry's
// SLAGeneration when the job was scheduled (SLA kinds); Level is the escalation level it raises to.
type DueJob struct {
	ID         string
	Kind       string
	Target     string
	DueAt      time.Time
	Generation uint64
	Level      int
}

// FireDue decides what a due job appends now. It returns no events when the job's reason has gone
// (the follow-up was cancelled or already fired, the inquiry closed, the SLA clock moved on to
// another generation, the target was met, or the event was already recorded): a job that fires
// late or twice changes nothing. recipients are the follow-up's authorized recipients.
func (q *Inquiry) FireDue(j DueJob, recipients []PrincipalID) []Event {
	if !q.Exists() || q.Archived || q.Erased {
		return nil
	}
	switch j.Kind {
	case KindFollowUp:
		f, ok := q.FollowUps[j.ID]
		if !ok {
			return nil
		}
		return []Event{FollowUpDue{JobID: j.ID, DueAt: f.DueAt, Recipients: recipients}}
	case KindSLAWarning, KindSLABreach:
		if q.SLAGeneration != j.Generation || !q.clockRunning(j.Target) {
			return nil
		}
		if _, done := q.Breaches[j.Target]; done {
			return nil
		}
		if j.Kind == KindSLABreach {
			return []Event{SLABreached{Target: j.Target, DueAt: j.DueAt}}
		}
		if w, ok := q.Warnings[j.Target]; ok && w.Equal(j.DueAt) {
			return nil
		}
		return []Event{SLAWarning{Target: j.Target, DueAt: j.DueAt}}
	case KindEscalation:
		if _, ok := q.Breaches[j.Target]; !ok || q.Status.Terminal() || q.EscalationLevel >= j.Level {
			return nil
		}
		return []Event{InquiryEscalated{Level: j.Level, Target: j.Target, Reason: "sla_breach"}}
	}
	return nil
}

// clockRunning reports whether target is still to be met.
func (q *Inquiry) clockRunning(target string) bool {
	switch target {
	case TargetFirstResponse:
		return q.FirstRespondedAt.IsZero() && !q.Status.Terminal()
	case TargetResolution:
		return !q.Status.Terminal() && q.PausedSince.IsZero()
	}
	return false
}
