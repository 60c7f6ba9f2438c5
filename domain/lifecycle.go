package domain

import (
	"encoding/json"
	"strings"
	"time"
)

// The data lifecycle (seed 001, "Retention、Archive、Deletion"): archive and unarchive are lifecycle
// commands with actor, reason and retention deadline; a legal hold stops every erasure; erasure is
// crypto-shredding (the inquiry's data key is destroyed by the storage layer) plus a non-personal
// tombstone, InquiryErased.

// Errors of the lifecycle commands. Each matches ErrConflict too, so a caller that only knows
// ErrConflict still answers 409.
var (
	// ErrArchived: the inquiry is archived; only unarchive (and hold, erase) apply to it.
	ErrArchived = &conflictError{"the inquiry is archived; unarchive it first"}
	// ErrErased: the inquiry was erased; nothing applies to it any more.
	ErrErased = &conflictError{"the inquiry was erased"}
	// ErrLegalHold: the inquiry is under legal hold and cannot be erased.
	ErrLegalHold = &conflictError{"the inquiry is under legal hold"}
)

type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

// Is reports ErrConflict.
func (e *conflictError) Is(target error) bool { return target == ErrConflict }

// The lifecycle actions. Archiving and unarchiving are operator work; holds and erasure are admin
// only.
const (
	ActArchive Action = "archive"
	ActHold    Action = "hold"
	ActErase   Action = "erase"
)

// Erased is what a personal field reads after its inquiry's data key was destroyed.
const Erased = "[erased]"

// MaxRetention bounds a retention deadline's distance from the archive.
const MaxRetention = 100 * 366 * 24 * time.Hour

// InquiryArchived takes an inquiry out of the working set. RetainUntil is when the retention policy
// may erase it (zero: the policy never does).
type InquiryArchived struct {
	Reason      string    `json:"reason"`
	RetainUntil time.Time `json:"retain_until,omitzero"`
	Class       string    `json:"retention_class,omitempty"`
}

// InquiryUnarchived brings an archived inquiry back, in the state it was archived in.
type InquiryUnarchived struct {
	Reason string `json:"reason,omitempty"`
}

// LegalHoldPlaced stops every erasure of the inquiry until released.
type LegalHoldPlaced struct {
	Reason string `json:"reason"`
}

// LegalHoldReleased ends a legal hold.
type LegalHoldReleased struct {
	Reason string `json:"reason,omitempty"`
}

// InquiryErased is the non-personal tombstone of an erasure: the inquiry's personal fields were
// destroyed (its data key), Policy names why ("request" for an admin's erasure, "retention:<class>"
// for the policy job). Actor and time are the event's metadata.
type InquiryErased struct {
	InquiryID InquiryID `json:"inquiry_id"`
	Receipt   string    `json:"receipt"`
	Policy    string    `json:"policy"`
}

// EventType implementations.
func (InquiryArchived) EventType() string   { return "InquiryArchived" }
func (InquiryUnarchived) EventType() string { return "InquiryUnarchived" }
func (LegalHoldPlaced) EventType() string   { return "LegalHoldPlaced" }
func (LegalHoldReleased) EventType() string { return "LegalHoldReleased" }
func (InquiryErased) EventType() string     { return "InquiryErased" }

func init() {
	decoders["InquiryArchived"] = decodeAs[InquiryArchived]
	decoders["InquiryUnarchived"] = decodeAs[InquiryUnarchived]
	decoders["LegalHoldPlaced"] = decodeAs[LegalHoldPlaced]
	decoders["LegalHoldReleased"] = decodeAs[LegalHoldReleased]
	decoders["InquiryErased"] = decodeAs[InquiryErased]
}

// applyLifecycle folds the events of this file.
func (q *Inquiry) applyLifecycle(e Event, at time.Time) {
	switch e := e.(type) {
	case InquiryArchived:
		q.Archived, q.ArchivedAt, q.RetainUntil, q.RetentionClass = true, at, e.RetainUntil, e.Class
		// A new generation: every pending reminder and SLA job of the old one does nothing.
		q.FollowUps = nil
		q.SLAGeneration++
	case InquiryUnarchived:
		q.Archived, q.ArchivedAt, q.RetainUntil = false, time.Time{}, time.Time{}
		q.SLAGeneration++
	case LegalHoldPlaced:
		q.Held = true
	case LegalHoldReleased:
		q.Held = false
	case InquiryErased:
		q.Erased, q.ErasedAt = true, at
		q.Requester = Requester{Name: Erased, Email: Erased}
		q.Subject, q.Message = Erased, Erased
		q.FollowUps = nil
		q.SLAGeneration++
	}
}

// writable refuses every operator write to an archived or erased inquiry.
func (q *Inquiry) writable() error {
	switch {
	case q.Erased:
		return ErrErased
	case q.Archived:
		return ErrArchived
	}
	return nil
}

// Archive decides an archive. retainUntil is the retention deadline the caller's policy computed
// (zero: none); class names that policy's retention class.
func (q *Inquiry) Archive(actor Principal, reason string, retainUntil, now time.Time, class string) ([]Event, error) {
	if err := Authorize(actor, ActArchive); err != nil {
		return nil, err
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	if !Visible(reason) {
		return nil, Invalid("reason", "is required to archive")
	}
	if err := checkLine("reason", reason, true, MaxReasonLen); err != nil {
		return nil, err
	}
	if !retainUntil.IsZero() && (retainUntil.Before(now) || retainUntil.Sub(now) > MaxRetention) {
		return nil, Invalid("retain_until", "must be in the future, within %s", MaxRetention)
	}
	if !retainUntil.IsZero() {
		retainUntil = retainUntil.UTC()
	}
	return []Event{InquiryArchived{Reason: reason, RetainUntil: retainUntil, Class: class}}, nil
}

// Unarchive decides an unarchive: the actor is authorized again, as for any write.
func (q *Inquiry) Unarchive(actor Principal, reason string) ([]Event, error) {
	if err := Authorize(actor, ActArchive); err != nil {
		return nil, err
	}
	if q.Erased {
		return nil, ErrErased
	}
	if !q.Archived {
		return nil, nil
	}
	reason = strings.TrimSpace(reason)
	if err := checkLine("reason", reason, false, MaxReasonLen); err != nil {
		return nil, err
	}
	return []Event{InquiryUnarchived{Reason: reason}}, nil
}

// PlaceHold decides a legal hold (admin). Placing a hold that is in place decides nothing.
func (q *Inquiry) PlaceHold(actor Principal, reason string) ([]Event, error) {
	if err := Authorize(actor, ActHold); err != nil {
		return nil, err
	}
	if q.Erased {
		return nil, ErrErased
	}
	reason = strings.TrimSpace(reason)
	if !Visible(reason) {
		return nil, Invalid("reason", "is required to place a legal hold")
	}
	if err := checkLine("reason", reason, true, MaxReasonLen); err != nil {
		return nil, err
	}
	if q.Held {
		return nil, nil
	}
	return []Event{LegalHoldPlaced{Reason: reason}}, nil
}

// ReleaseHold decides the end of a legal hold (admin).
func (q *Inquiry) ReleaseHold(actor Principal, reason string) ([]Event, error) {
	if err := Authorize(actor, ActHold); err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	if err := checkLine("reason", reason, false, MaxReasonLen); err != nil {
		return nil, err
	}
	if !q.Held {
		return nil, nil
	}
	return []Event{LegalHoldReleased{Reason: reason}}, nil
}

// Erase decides an erasure (admin, or the retention policy acting as System with an admin role).
// A held inquiry is ErrLegalHold; an erased one decides nothing (the storage layer destroys its key
// again, which is idempotent).
func (q *Inquiry) Erase(actor Principal, policy string) ([]Event, error) {
	if err := Authorize(actor, ActErase); err != nil {
		return nil, err
	}
	if q.Held {
		return nil, ErrLegalHold
	}
	if q.Erased {
		return nil, nil
	}
	if policy == "" || len(policy) > MaxCategoryLen*2 {
		return nil, Invalid("policy", "is required")
	}
	return []Event{InquiryErased{InquiryID: q.ID, Receipt: q.Receipt, Policy: policy}}, nil
}

// erasedText is what a personal free-text member reads once erased.
var erasedText = json.RawMessage(`"` + Erased + `"`)

// personalFields lists, per event type, the JSON members that hold personal data (FieldClasses:
// requester.*, subject, message, note.body, follow_up.note) or free text a person typed (the
// reason of a transition, an archive or unarchive, a legal hold placed or released: it may name
// the requester or quote the inquiry), with what each reads once erased. The storage layer seals
// exactly these members with the inquiry's data key. Members a machine writes (ids, statuses,
// retention classes, an escalation's reason code) stay in clear.
var personalFields = map[string]map[string]json.RawMessage{
	"InquiryReceived": {
		"requester": json.RawMessage(`{"name":"` + Erased + `","email":"` + Erased + `"}`),
		"subject":   json.RawMessage(`"` + Erased + `"`),
		"message":   json.RawMessage(`"` + Erased + `"`),
		// A portal's id of its customer names the person as surely as an address does.
		"external_id": json.RawMessage(`"` + Erased + `"`),
	},
	"NoteAdded":            {"body": erasedText},
	"FollowUpScheduled":    {"note": erasedText},
	"InquiryStatusChanged": {"reason": erasedText},
	"InquiryArchived":      {"reason": erasedText},
	"InquiryUnarchived":    {"reason": erasedText},
	"LegalHoldPlaced":      {"reason": erasedText},
	"LegalHoldReleased":    {"reason": erasedText},
}

// RedactJSON returns an event payload of type typ with each personal member reading as erased
// (members absent from data stay absent); payloads of other types are returned as they are.
func RedactJSON(typ string, data []byte) ([]byte, error) {
	fields := personalFields[typ]
	if fields == nil {
		return data, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	changed := false
	for f, v := range fields {
		if _, ok := obj[f]; ok {
			obj[f], changed = v, true
		}
	}
	if !changed {
		return data, nil
	}
	return json.Marshal(obj)
}

// PersonalFields returns the personal JSON members of events of type typ and what each reads once
// erased; nil when the type holds no personal data. The map must not be modified.
func PersonalFields(typ string) map[string]json.RawMessage { return personalFields[typ] }
