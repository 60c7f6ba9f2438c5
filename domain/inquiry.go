package domain

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Inquiry is the aggregate state folded from an inquiry's events. Version is the number of events
// applied; the zero Inquiry (Version 0) does not exist yet.
type Inquiry struct {
	ID        InquiryID
	TenantID  TenantID
	Source    Source
	Receipt   string
	Requester Requester
	Subject   string
	Message   string
	Category  string
	// SubmittedBy, ExternalID and Permalink come from authenticated intake (InquiryReceived).
	SubmittedBy PrincipalID
	ExternalID  string
	Permalink   string
	Status      Status
	Priority    Priority
	Owner       PrincipalID
	Team        string
	Version     uint64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ClosedAt    time.Time

	// Due dates, reminders and the SLA clock's facts (due.go, sla.go).
	DueAt            time.Time
	FollowUps        map[string]FollowUp // pending reminders by job id
	Watchers         []PrincipalID
	EscalationLevel  int
	FirstRespondedAt time.Time
	Warnings         map[string]time.Time // SLA target → the due time warned about
	Breaches         map[string]time.Time // SLA target → the due time that passed
	// Paused holds the closed intervals in which the resolution clock stood still (waiting,
	// resolved); PausedSince is set while it stands still now.
	Paused      [][2]time.Time
	PausedSince time.Time
	// SLAGeneration changes whenever the SLA clock may have changed (triage, status, first
	// response); an SLA due job of an older generation does nothing.
	SLAGeneration uint64

	// The data lifecycle (lifecycle.go).
	Archived       bool
	ArchivedAt     time.Time
	RetainUntil    time.Time
	RetentionClass string
	Held           bool
	Erased         bool
	ErasedAt       time.Time

	// The times of the latest notes and follow-up schedulings, oldest first, as many as their
	// rate limits count (limits.go).
	NoteTimes     []time.Time
	FollowUpTimes []time.Time
}

// Clone returns a deep copy of q: applying events to one never changes the other.
func (q *Inquiry) Clone() *Inquiry {
	c := *q
	c.FollowUps = maps.Clone(q.FollowUps)
	c.Watchers = slices.Clone(q.Watchers)
	c.Warnings = maps.Clone(q.Warnings)
	c.Breaches = maps.Clone(q.Breaches)
	c.Paused = slices.Clone(q.Paused)
	c.NoteTimes = slices.Clone(q.NoteTimes)
	c.FollowUpTimes = slices.Clone(q.FollowUpTimes)
	return &c
}

// Exists reports whether the inquiry has been received.
func (q *Inquiry) Exists() bool { return q.Version > 0 }

// Apply folds one event into the state. Events are facts: Apply never fails.
func (q *Inquiry) Apply(e Event, at time.Time) {
	switch e := e.(type) {
	case InquiryReceived:
		q.ID, q.TenantID, q.Source, q.Receipt = e.InquiryID, e.TenantID, e.Source, e.Receipt
		q.Requester, q.Subject, q.Message, q.Category = e.Requester, e.Subject, e.Message, e.Category
		q.Status, q.Priority = StatusNew, e.Priority
		q.SubmittedBy, q.ExternalID, q.Permalink, q.Team = e.SubmittedBy, e.ExternalID, e.Permalink, e.Team
		q.CreatedAt = at
	case InquiryTriaged:
		q.Status = StatusTriaged
		if e.Priority != "" {
			q.Priority = e.Priority
		}
	case InquiryStatusChanged:
		q.Status = e.To
		if e.To.Terminal() {
			q.ClosedAt = at
		} else {
			q.ClosedAt = time.Time{}
		}
	case InquiryAssigned:
		q.Owner, q.Team = e.Owner, e.Team
	case NoteAdded:
		q.NoteTimes = recent(q.NoteTimes, at, MaxNotesPerHour)
	case FollowUpScheduled:
		q.FollowUpTimes = recent(q.FollowUpTimes, at, MaxFollowUpsPerHour)
	}
	q.applyDue(e, at)
	q.applyLifecycle(e, at)
	q.Version++
	q.UpdatedAt = at
}

// Terminal reports whether no work happens in s. Resolved can still be reopened; cancelled cannot.
func (s Status) Terminal() bool { return s == StatusResolved || s == StatusCancelled }

// edges is the lifecycle graph. The value says whether the edge requires a reason.
var edges = map[Status]map[Status]bool{
	StatusNew:        {StatusTriaged: false, StatusCancelled: true},
	StatusTriaged:    {StatusInProgress: false, StatusCancelled: true},
	StatusInProgress: {StatusWaiting: true, StatusResolved: false, StatusCancelled: true},
	StatusWaiting:    {StatusInProgress: false, StatusResolved: false, StatusCancelled: true},
	StatusResolved:   {StatusInProgress: false}, // reopen
	StatusCancelled:  {},
}

// CanTransition reports whether from → to is an edge, and whether it requires a reason.
func CanTransition(from, to Status) (ok, needsReason bool) {
	needsReason, ok = edges[from][to]
	return ok, needsReason
}

// NewInquiry is the decided input of an intake.
type NewInquiry struct {
	ID        InquiryID
	TenantID  TenantID
	Source    Source
	Receipt   string
	Requester Requester
	Subject   string
	Message   string
	Category  string
	// Optional, from authenticated intake: the submitter, the portal's customer id, a priority
	// (default normal), a team, and a Slack message's permalink (source slack only).
	SubmittedBy PrincipalID
	ExternalID  string
	Priority    Priority
	Team        string
	Permalink   string
}

// MaxExternalIDLen bounds a portal's customer id, in characters; MaxPermalinkLen a Slack permalink.
const (
	MaxExternalIDLen = 128
	MaxPermalinkLen  = 500
)

// Receive decides an intake. It validates every field and returns the stream's first event.
func Receive(n NewInquiry) ([]Event, error) {
	if n.ID == "" || n.TenantID == "" || n.Receipt == "" {
		return nil, Invalid("inquiry", "identity is incomplete")
	}
	if !n.Source.Valid() {
		return nil, Invalid("source", "unknown source %q", n.Source)
	}
	if err := CheckName("name", n.Requester.Name, false); err != nil {
		return nil, err
	}
	// A Slack author is identified by the workspace; an address is optional there.
	emailOptional := n.Source == SourceSlack && n.Requester.SlackUser != ""
	if err := checkLine("email", n.Requester.Email, !emailOptional, MaxEmailLen); err != nil {
		return nil, err
	}
	if n.Requester.Email != "" && !ValidEmail(n.Requester.Email) {
		return nil, Invalid("email", "is not a valid address")
	}
	if n.Requester.SlackUser != "" && (n.Source != SourceSlack || !slackUserRE(n.Requester.SlackUser)) {
		return nil, Invalid("slack_user", "is not a Slack user id of a Slack intake")
	}
	if err := checkLine("subject", n.Subject, true, MaxSubjectLen); err != nil {
		return nil, err
	}
	if err := checkText("message", n.Message, true, MaxMessageLen); err != nil {
		return nil, err
	}
	if err := checkCategory(n.Category); err != nil {
		return nil, err
	}
	prio := PriorityNormal
	if n.Priority != "" {
		p, err := ParsePriority("priority", string(n.Priority))
		if err != nil {
			return nil, err
		}
		prio = p
	}
	if n.Team != "" && (len(n.Team) > MaxTeamLen || checkCategory(n.Team) != nil) {
		return nil, Invalid("team", "must be a lowercase slug of at most %d characters", MaxTeamLen)
	}
	if err := checkLine("external_id", n.ExternalID, false, MaxExternalIDLen); err != nil {
		return nil, err
	}
	if n.Permalink != "" && (n.Source != SourceSlack || len(n.Permalink) > MaxPermalinkLen || !strings.HasPrefix(n.Permalink, "https://") ||
		strings.ContainsAny(n.Permalink, " \t\r\n\"<>")) {
		return nil, Invalid("permalink", "must be the https permalink of a Slack message")
	}
	return []Event{InquiryReceived{
		InquiryID: n.ID, TenantID: n.TenantID, Source: n.Source, Receipt: n.Receipt,
		Requester: n.Requester, Subject: n.Subject, Message: n.Message, Category: n.Category,
		Priority: prio, SubmittedBy: n.SubmittedBy, ExternalID: n.ExternalID, Team: n.Team, Permalink: n.Permalink,
	}}, nil
}

// slackUserRE reports whether s looks like a Slack user id (U… or W…, upper-case letters and digits).
func slackUserRE(s string) bool {
	if len(s) < 3 || len(s) > 32 || (s[0] != 'U' && s[0] != 'W') {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// Transition decides a lifecycle edge. priority is only accepted on the edge to triaged.
func (q *Inquiry) Transition(actor Principal, to Status, reason string, priority Priority) ([]Event, error) {
	act := ActTransit
	if to == StatusTriaged {
		act = ActTriage
	}
	if err := Authorize(actor, act); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	ok, needsReason := CanTransition(q.Status, to)
	if !ok {
		return nil, &TransitionError{From: q.Status, To: to}
	}
	reason = strings.TrimSpace(reason)
	if needsReason && !Visible(reason) {
		return nil, Invalid("reason", "is required to move to %s", to)
	}
	if err := checkLine("reason", reason, false, MaxReasonLen); err != nil {
		return nil, err
	}
	if priority != "" && to != StatusTriaged {
		return nil, Invalid("priority", "can only be set when triaging")
	}
	if to == StatusTriaged {
		if priority == "" {
			priority = q.Priority
		}
		return []Event{InquiryTriaged{Priority: priority}}, nil
	}
	return []Event{InquiryStatusChanged{From: q.Status, To: to, Reason: reason}}, nil
}

// Claim makes actor the owner. A claim on a new or triaged inquiry also starts work on it. Claiming an
// inquiry one already owns decides nothing; one owned by someone else is a *ClaimedError.
func (q *Inquiry) Claim(actor Principal) ([]Event, error) {
	if err := Authorize(actor, ActClaim); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	if q.Status.Terminal() {
		return nil, &TransitionError{From: q.Status, To: StatusInProgress}
	}
	if q.Owner != "" && q.Owner != actor.ID {
		return nil, &ClaimedError{Owner: q.Owner}
	}
	var out []Event
	if q.Owner != actor.ID {
		out = append(out, InquiryAssigned{Owner: actor.ID, Previous: q.Owner, Team: actor.Team})
	}
	if q.Status == StatusNew || q.Status == StatusTriaged {
		out = append(out, InquiryStatusChanged{From: q.Status, To: StatusInProgress})
	}
	return out, nil
}

// Assign makes owner the owner. Operators may assign only within their own team; admins anywhere.
// The owner must be an operator or admin of the same tenant (a viewer or integration cannot own).
func (q *Inquiry) Assign(actor, owner Principal) ([]Event, error) {
	if err := Authorize(actor, ActAssign); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	if owner.TenantID != q.TenantID || owner.ID == "" {
		return nil, Invalid("owner", "is not a principal of this tenant")
	}
	if owner.Disabled {
		return nil, Invalid("owner", "is disabled")
	}
	if Authorize(owner, ActClaim) != nil {
		return nil, Invalid("owner", "only operators and admins can own inquiries")
	}
	if actor.Role != RoleAdmin && owner.ID != actor.ID && owner.Team != actor.Team {
		return nil, ErrForbidden
	}
	if q.Status.Terminal() {
		return nil, &TransitionError{From: q.Status, To: q.Status}
	}
	if q.Owner == owner.ID {
		return nil, nil
	}
	return []Event{InquiryAssigned{Owner: owner.ID, Previous: q.Owner, Team: owner.Team}}, nil
}

// AddNote decides an operator note at now (MaxNotesPerHour).
func (q *Inquiry) AddNote(actor Principal, body string, now time.Time) ([]Event, error) {
	if err := Authorize(actor, ActNote); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	if err := checkText("body", body, true, MaxNoteLen); err != nil {
		return nil, err
	}
	if err := checkRate("notes", q.NoteTimes, MaxNotesPerHour, now); err != nil {
		return nil, err
	}
	return []Event{NoteAdded{Body: body}}, nil
}
