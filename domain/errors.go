// Package domain holds Casebook's inquiry aggregate, its events, the lifecycle graph, the role policy
// and the errors callers branch on. It does no I/O and reads time only from its arguments.
package domain

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on them with errors.Is; adapters map them to transport codes in
// exactly one place each.
var (
	// ErrNotFound: the thing does not exist in the caller's tenant. A well-formed id of another
	// tenant is indistinguishable from an unknown id.
	ErrNotFound = errors.New("not found")
	// ErrConcurrency: the expected version no longer holds; reload and decide again.
	ErrConcurrency = errors.New("concurrency conflict")
	// ErrForbidden: the principal is known but its role or team does not allow the command.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthenticated: no valid credential.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrInvalidTransition: the lifecycle graph has no such edge, or the state is terminal.
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrValidation: the command is malformed (see ValidationError for the field).
	ErrValidation = errors.New("validation failed")
	// ErrIdempotencyMismatch: an idempotency key was reused with a different payload.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
	// ErrAlreadyClaimed: the inquiry is owned by another principal.
	ErrAlreadyClaimed = errors.New("already claimed")
	// ErrPreconditionRequired: a conditional command came without the version it applies to.
	ErrPreconditionRequired = errors.New("precondition required")
	// ErrConflict: the command conflicts with existing state (for example a duplicate slug).
	ErrConflict = errors.New("conflict")
	// ErrPrincipalDisabled: the principal exists but an admin disabled it; it matches ErrForbidden.
	// Every credential of a disabled principal (API token, console session, linked Slack user) is
	// refused from the next request on.
	ErrPrincipalDisabled = fmt.Errorf("principal disabled: %w", ErrForbidden)
)

// ValidationError names the offending field. It matches ErrValidation with errors.Is.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

// Is reports ErrValidation.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// Invalid returns a *ValidationError for field.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// TransitionError reports a refused lifecycle edge. It matches ErrInvalidTransition.
type TransitionError struct {
	From, To Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("no transition from %s to %s", e.From, e.To)
}

// Is reports ErrInvalidTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// ClaimedError reports who holds an inquiry. It matches ErrAlreadyClaimed.
type ClaimedError struct {
	Owner PrincipalID
}

func (e *ClaimedError) Error() string { return fmt.Sprintf("already claimed by %s", e.Owner) }

// Is reports ErrAlreadyClaimed.
func (e *ClaimedError) Is(target error) bool { return target == ErrAlreadyClaimed }

// VersionConflictError reports that an inquiry is no longer at the version a command expected: it
// is at Version, last changed by ChangedBy. It matches ErrConcurrency, and names no stream, tenant
// or store revision.
type VersionConflictError struct {
	Version   uint64
	ChangedBy PrincipalID
}

func (e *VersionConflictError) Error() string {
	return fmt.Sprintf("the inquiry changed: it is at version %d, last changed by %s", e.Version, e.ChangedBy)
}

// Is reports ErrConcurrency.
func (e *VersionConflictError) Is(target error) bool { return target == ErrConcurrency }
