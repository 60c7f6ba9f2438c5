package commands

import (
	"errors"
	"net/http"

	"github.com/casebook/casebook/domain"
)

// errorTable is the one mapping of command errors to their stable code, the HTTP status the API
// answers with and the message shown when the error carries none fit to show. The audit, the HTTP
// API, the form and the Slack callbacks all read it (through Classify and ErrorCode). Order matters:
// the first sentinel err matches wins.
var errorTable = []struct {
	err     error
	code    string
	status  int
	message string
}{
	{domain.ErrUnauthenticated, "unauthenticated", http.StatusUnauthorized, "a valid bearer token is required"},
	{domain.ErrPrincipalDisabled, "principal_disabled", http.StatusForbidden, "this principal is disabled; an admin of the tenant can enable it again"},
	{domain.ErrForbidden, "forbidden", http.StatusForbidden, "forbidden"},
	{domain.ErrNotFound, "not_found", http.StatusNotFound, "not found"},
	{domain.ErrPreconditionRequired, "precondition_required", http.StatusPreconditionRequired, "If-Match is required"},
	{domain.ErrConcurrency, "version_mismatch", http.StatusPreconditionFailed, "the inquiry changed; reload it and try again"},
	{domain.ErrAlreadyClaimed, "already_claimed", http.StatusConflict, "already claimed"},
	{domain.ErrLegalHold, "legal_hold", http.StatusConflict, "the inquiry is under legal hold"},
	{domain.ErrErased, "erased", http.StatusConflict, "the inquiry was erased"},
	{domain.ErrArchived, "archived", http.StatusConflict, "the inquiry is archived; unarchive it first"},
	{domain.ErrConflict, "conflict", http.StatusConflict, "conflict"},
	{domain.ErrRateLimited, "rate_limited", http.StatusTooManyRequests, "too many changes of this kind to the inquiry; try again later"},
	{domain.ErrIdempotencyMismatch, "idempotency_key_reused", http.StatusUnprocessableEntity, "idempotency key reused with a different request"},
	{domain.ErrInvalidTransition, "invalid_transition", http.StatusUnprocessableEntity, "invalid transition"},
	{domain.ErrValidation, "validation_failed", http.StatusUnprocessableEntity, "validation failed"},
}

// Internal is the code of every error outside the table.
const Internal = "internal"

// Classify returns err's code, HTTP status and a message safe to show: the error's own text for the
// domain's typed errors (a field, an edge, an owner, a version), which carry no internal
// identifier, else the table's fixed message. Anything not in the table is Internal, 500, and
// "internal error": its text may name streams, SQL or tenants and is for the logs only.
func Classify(err error) (code string, status int, message string) {
	for _, c := range errorTable {
		if errors.Is(err, c.err) {
			return c.code, c.status, showable(err, c.message)
		}
	}
	return Internal, http.StatusInternalServerError, "internal error"
}

func showable(err error, fallback string) string {
	var (
		ve *domain.ValidationError
		te *domain.TransitionError
		ce *domain.ClaimedError
		vc *domain.VersionConflictError
		rl *domain.RateLimitError
	)
	switch {
	case errors.As(err, &ve):
		return ve.Error()
	case errors.As(err, &te):
		return te.Error()
	case errors.As(err, &ce):
		return ce.Error()
	case errors.As(err, &vc):
		return vc.Error()
	case errors.As(err, &rl):
		return rl.Error()
	}
	return fallback
}

// ErrorCode names a command error for the audit: its code in the one table, Internal for anything
// else, "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	code, _, _ := Classify(err)
	return code
}

// ErrorCodes lists every code Classify may return.
func ErrorCodes() []string {
	out := make([]string, 0, len(errorTable)+1)
	for _, c := range errorTable {
		out = append(out, c.code)
	}
	return append(out, Internal)
}
