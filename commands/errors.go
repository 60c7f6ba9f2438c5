package commands

import (
	"errors"
	"net/http"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// errorTable is the one mapping of command errors to their stable code, the HTTP status the API
// answers with and the message shown when the error carries none fit to show. The audit, the HTTP
// API, the form and the Slack callbacks all read it (through Classify and ErrorCode). Order matters:
// the first sentinel err matches wins.
var errorTable = []struct {
	err     error
	is      func(error) bool // matches instead of err, for errors of the storage drivers
	code    string
	status  int
	message string
}{
	{err: domain.ErrUnauthenticated, code: "unauthenticated", status: http.StatusUnauthorized, message: "a valid bearer token is required"},
	{err: domain.ErrPrincipalDisabled, code: "principal_disabled", status: http.StatusForbidden, message: "this principal is disabled; an admin of the tenant can enable it again"},
	{err: domain.ErrForbidden, code: "forbidden", status: http.StatusForbidden, message: "forbidden"},
	{err: domain.ErrNotFound, code: "not_found", status: http.StatusNotFound, message: "not found"},
	{err: domain.ErrPreconditionRequired, code: "precondition_required", status: http.StatusPreconditionRequired, message: "If-Match is required"},
	{err: domain.ErrConcurrency, code: "version_mismatch", status: http.StatusPreconditionFailed, message: "the inquiry changed; reload it and try again"},
	{err: domain.ErrAlreadyClaimed, code: "already_claimed", status: http.StatusConflict, message: "already claimed"},
	{err: domain.ErrLegalHold, code: "legal_hold", status: http.StatusConflict, message: "the inquiry is under legal hold"},
	{err: domain.ErrErased, code: "erased", status: http.StatusConflict, message: "the inquiry was erased"},
	{err: domain.ErrArchived, code: "archived", status: http.StatusConflict, message: "the inquiry is archived; unarchive it first"},
	{err: domain.ErrConflict, code: "conflict", status: http.StatusConflict, message: "conflict"},
	{err: domain.ErrRateLimited, code: "rate_limited", status: http.StatusTooManyRequests, message: "too many changes of this kind to the inquiry; try again later"},
	{err: domain.ErrIdempotencyMismatch, code: "idempotency_key_reused", status: http.StatusUnprocessableEntity, message: "idempotency key reused with a different request"},
	{err: domain.ErrInvalidTransition, code: "invalid_transition", status: http.StatusUnprocessableEntity, message: "invalid transition"},
	{err: domain.ErrValidation, code: "validation_failed", status: http.StatusUnprocessableEntity, message: "validation failed"},
	// Nothing was written; the caller retries once space returns (the HTTP API adds Retry-After).
	{is: sqldb.IsStorageFull, code: StorageFull, status: http.StatusServiceUnavailable, message: "storage is full; nothing was recorded, retry later"},
}

// StorageFull is the code of a refusal because the database's disk is full (503).
const StorageFull = "storage_full"

// Internal is the code of every error outside the table.
const Internal = "internal"

// Classify returns err's code, HTTP status and a message safe to show: the error's own text for the
// domain's typed errors (a field, an edge, an owner, a version), which carry no internal
// identifier, else the table's fixed message. Anything not in the table is Internal, 500, and
// "internal error": its text may name streams, SQL or tenants and is for the logs only.
func Classify(err error) (code string, status int, message string) {
	for _, c := range errorTable {
		if c.err != nil && errors.Is(err, c.err) || c.is != nil && c.is(err) {
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
