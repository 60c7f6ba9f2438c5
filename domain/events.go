package domain

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Event is a past-tense fact about one inquiry. Events are immutable once appended.
type Event interface {
	EventType() string
}

// InquiryReceived opens an inquiry's stream.
type InquiryReceived struct {
	InquiryID InquiryID `json:"inquiry_id"`
	TenantID  TenantID  `json:"tenant_id"`
	Source    Source    `json:"source"`
	Receipt   string    `json:"receipt"`
	Requester Requester `json:"requester"`
	Subject   string    `json:"subject"`
	Message   string    `json:"message"`
	Category  string    `json:"category,omitempty"`
	Priority  Priority  `json:"priority"`
	// Set by authenticated intake only: the submitting principal (an integration or operator),
	// the portal's own customer id, the team asked for, and for Slack the message's permalink.
	SubmittedBy PrincipalID `json:"submitted_by,omitempty"`
	ExternalID  string      `json:"external_id,omitempty"`
	Team        string      `json:"team,omitempty"`
	Permalink   string      `json:"permalink,omitempty"`
}

// InquiryTriaged moves a new inquiry to triaged and sets its priority.
type InquiryTriaged struct {
	Priority Priority `json:"priority"`
}

// InquiryStatusChanged records every other lifecycle edge.
type InquiryStatusChanged struct {
	From   Status `json:"from"`
	To     Status `json:"to"`
	Reason string `json:"reason,omitempty"`
}

// InquiryAssigned records a new owner; Previous is empty for the first assignment.
type InquiryAssigned struct {
	Owner    PrincipalID `json:"owner"`
	Previous PrincipalID `json:"previous,omitempty"`
	Team     string      `json:"team,omitempty"`
}

// NoteAdded records an operator note.
type NoteAdded struct {
	Body string `json:"body"`
}

// EventType implementations.
func (InquiryReceived) EventType() string      { return "InquiryReceived" }
func (InquiryTriaged) EventType() string       { return "InquiryTriaged" }
func (InquiryStatusChanged) EventType() string { return "InquiryStatusChanged" }
func (InquiryAssigned) EventType() string      { return "InquiryAssigned" }
func (NoteAdded) EventType() string            { return "NoteAdded" }

// SchemaVersion is the payload schema every event is written with. Decode upcasts older versions.
const SchemaVersion = 1

// Metadata travels with every event.
type Metadata struct {
	TenantID       TenantID    `json:"tenant_id"`
	Actor          PrincipalID `json:"actor"`
	CommandID      string      `json:"command_id"`
	IdempotencyKey string      `json:"idempotency_key,omitempty"`
	// RequestHash fingerprints the command payload, so a reused key with another payload is refused.
	RequestHash   string    `json:"request_hash,omitempty"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	OccurredAt    time.Time `json:"occurred_at"`
	SchemaVersion int       `json:"schema_version"`
}

// Encode returns the event's type name and JSON payload.
func Encode(e Event) (string, []byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s: %w", e.EventType(), err)
	}
	return e.EventType(), b, nil
}

// decoders maps every event type to its decoder: the one list of the types a stream may hold.
var decoders = map[string]func([]byte) (Event, error){
	"InquiryReceived":      decodeAs[InquiryReceived],
	"InquiryTriaged":       decodeAs[InquiryTriaged],
	"InquiryStatusChanged": decodeAs[InquiryStatusChanged],
	"InquiryAssigned":      decodeAs[InquiryAssigned],
	"NoteAdded":            decodeAs[NoteAdded],
	"FollowUpScheduled":    decodeAs[FollowUpScheduled],
	"FollowUpCancelled":    decodeAs[FollowUpCancelled],
	"DueDateSet":           decodeAs[DueDateSet],
	"WatcherAdded":         decodeAs[WatcherAdded],
	"InquiryRouted":        decodeAs[InquiryRouted],
	"FollowUpDue":          decodeAs[FollowUpDue],
	"SLAWarning":           decodeAs[SLAWarning],
	"SLABreached":          decodeAs[SLABreached],
	"InquiryEscalated":     decodeAs[InquiryEscalated],
	"SLAPolicySet":         decodeAs[SLAPolicySet],
}

func decodeAs[E Event](data []byte) (Event, error) {
	var e E
	err := json.Unmarshal(data, &e)
	return e, err
}

// EventTypes lists every event type Decode knows, sorted.
func EventTypes() []string {
	return slices.Sorted(maps.Keys(decoders))
}

// Decode parses a payload written by Encode at schemaVersion (0 means current). Unknown types are an
// error: a reader must never silently skip a fact it does not understand.
func Decode(typ string, schemaVersion int, data []byte) (Event, error) {
	if schemaVersion > SchemaVersion {
		return nil, fmt.Errorf("decode %s: schema version %d is newer than %d", typ, schemaVersion, SchemaVersion)
	}
	dec, ok := decoders[typ]
	if !ok {
		return nil, fmt.Errorf("decode: unknown event type %q", typ)
	}
	e, err := dec(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", typ, err)
	}
	return e, nil
}
