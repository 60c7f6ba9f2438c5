package slackeffects

import (
	"strconv"
	"strings"
	"time"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
)

// Class is what a failed Slack call means for its effect.
type Class string

// Failure classes, recorded in health and shown to operators.
const (
	// ClassUnknown: the call may have applied (a timeout, a dropped connection, a 5xx, or Slack's
	// fatal_error, internal_error, request_timeout). Retried with backoff; a create is looked up
	// (reconciled) before it is sent again.
	ClassUnknown Class = "unknown_result"
	// ClassRateLimited: a 429. The destination's shared cooldown is set from Retry-After; no attempt
	// is spent.
	ClassRateLimited Class = "rate_limited"
	// ClassCircuit: authorization, permission or a destination that is gone or closed. The
	// destination's circuit opens; a probe every Timing.ProbeEvery (or an operator) closes it.
	ClassCircuit Class = "circuit_open"
	// ClassCapacity: the destination is full (a List's row cap). A circuit only an operator closes.
	ClassCapacity Class = "capacity"
	// ClassDrift: the destination's schema changed. The kind confirms it (Plan.Refine); the
	// destination then fails closed until it is re-activated.
	ClassDrift Class = "schema_drift"
	// ClassQuarantined: this effect's data is refused. Cancelled alone, with its reason, and kept
	// until an operator retries or cancels it.
	ClassQuarantined Class = "quarantined"
	// ClassGone: the row or message was deleted. Retried: the kind reconciles (recreates) it.
	ClassGone Class = "gone"
	// ClassTransient: any other refusal; Slack answered, so nothing applied. Retried with backoff.
	ClassTransient Class = "transient"
)

// codes is the one table of Slack error codes. Each code means the same for every method Casebook
// calls (chat.postMessage, chat.update, conversations.history, slackLists.items.*), as Slack's
// method pages document them; a code not listed is ClassTransient. Sources: the "Errors" tables of
// https://api.slack.com/methods/chat.postMessage, chat.update, conversations.history,
// slackLists.items.create, slackLists.items.update, slackLists.items.delete, slackLists.items.list,
// and https://api.slack.com/docs/rate-limits.
var codes = map[string]Class{
	"fatal_error": ClassUnknown, "internal_error": ClassUnknown, "request_timeout": ClassUnknown,
	"service_unavailable": ClassUnknown,

	"ratelimited": ClassRateLimited, "rate_limited": ClassRateLimited,

	"not_authed": ClassCircuit, "invalid_auth": ClassCircuit, "account_inactive": ClassCircuit,
	"token_revoked": ClassCircuit, "token_expired": ClassCircuit, "missing_scope": ClassCircuit,
	"not_in_channel": ClassCircuit, "channel_not_found": ClassCircuit, "is_archived": ClassCircuit,
	"permission_denied": ClassCircuit, "access_denied": ClassCircuit, "no_permission": ClassCircuit,
	"list_not_found": ClassCircuit, "ekm_access_denied": ClassCircuit, "team_access_not_granted": ClassCircuit,

	"over_row_maximum": ClassCapacity,

	"column_not_found": ClassDrift, "invalid_column_id": ClassDrift, "invalid_option_id": ClassDrift,
	"invalid_input_type": ClassDrift, "column_id_not_provided": ClassDrift, "uneditable_column": ClassDrift,

	"msg_blocks_too_long": ClassQuarantined, "invalid_blocks": ClassQuarantined, "invalid_blocks_format": ClassQuarantined,
	"invalid_args": ClassQuarantined, "invalid_arguments": ClassQuarantined, "invalid_text_block": ClassQuarantined,
	"msg_too_long": ClassQuarantined, "no_text": ClassQuarantined, "invalid_metadata_format": ClassQuarantined,
	"too_many_attachments": ClassQuarantined, "invalid_date": ClassQuarantined, "over_cell_fields_limit": ClassQuarantined,

	"row_not_found": ClassGone, "record_deleted": ClassGone, "record_not_found": ClassGone,
	"invalid_row_id": ClassGone, "message_not_found": ClassGone,
}

// Failure is a classified failed call.
type Failure struct {
	Class      Class
	Code       string        // Slack's error code, or "http_NNN", or "" for a transport error
	RetryAfter time.Duration // ClassRateLimited only
	Err        error
}

// Classify reads a failed Slack call. restricted_action* codes (workspace policy) open the circuit.
func Classify(err error) Failure {
	c, ok := slackinstall.Decode(err)
	f := Failure{Class: ClassUnknown, Code: c.Code, Err: err}
	switch {
	case !ok:
		return f // transport error or abandoned call: possibly applied
	case c.Code == "ratelimited":
		f.Class, f.RetryAfter = ClassRateLimited, max(c.RetryAfter, time.Second)
	case c.Code != "":
		if cl, known := codes[c.Code]; known {
			f.Class = cl
		} else if strings.HasPrefix(c.Code, "restricted_action") {
			f.Class = ClassCircuit
		} else {
			f.Class = ClassTransient
		}
	case c.Status >= 500:
		f.Code = "http_" + strconv.Itoa(c.Status)
	default:
		f.Class, f.Code = ClassTransient, "http_"+strconv.Itoa(c.Status)
	}
	return f
}

// CertainlyNotApplied reports a failed call that proves the write did not happen: Slack answered
// with an error that is not one of its "possibly applied" codes. Only then may a claimed attempt
// be released (Ledger.Release) and the write be sent again without a lookup.
func CertainlyNotApplied(err error) bool {
	c, ok := slackinstall.Decode(err)
	return ok && c.Answered && Classify(err).Class != ClassUnknown
}
