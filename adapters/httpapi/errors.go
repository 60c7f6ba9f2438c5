package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/casebook/casebook/domain"
)

// errorBody is the one error shape: {"error":{"code":…,"message":…,"request_id":…}}.
type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Field     string `json:"field,omitempty"`
		RequestID string `json:"request_id,omitempty"`
	} `json:"error"`
}

// apiError is an error raised by the HTTP layer itself (malformed requests, limits).
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(msg string) error { return &apiError{http.StatusBadRequest, "bad_request", msg} }

// statusOf is the one mapping from errors to HTTP statuses and codes.
func statusOf(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.Is(err, domain.ErrUnauthenticated):
		return http.StatusUnauthorized, "unauthenticated"
	case errors.Is(err, domain.ErrForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, domain.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, domain.ErrPreconditionRequired):
		return http.StatusPreconditionRequired, "precondition_required"
	case errors.Is(err, domain.ErrConcurrency):
		return http.StatusPreconditionFailed, "version_mismatch"
	case errors.Is(err, domain.ErrAlreadyClaimed):
		return http.StatusConflict, "already_claimed"
	case errors.Is(err, domain.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, domain.ErrIdempotencyMismatch):
		return http.StatusUnprocessableEntity, "idempotency_key_reused"
	case errors.Is(err, domain.ErrInvalidTransition):
		return http.StatusUnprocessableEntity, "invalid_transition"
	case errors.Is(err, domain.ErrValidation):
		return http.StatusUnprocessableEntity, "validation_failed"
	}
	return http.StatusInternalServerError, "internal"
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	var body errorBody
	body.Error.Code = code
	body.Error.Message = err.Error()
	body.Error.RequestID = requestID(r.Context())
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		body.Error.Field = ve.Field
	}
	switch {
	case status == http.StatusInternalServerError:
		// Internal errors may carry storage details: log them, answer generically.
		s.logger().ErrorContext(r.Context(), "request failed", "request_id", body.Error.RequestID, "err", err)
		body.Error.Message = "internal error"
	case errors.Is(err, domain.ErrNotFound):
		body.Error.Message = "not found" // identical for unknown ids and other tenants' ids
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="casebook"`)
		body.Error.Message = "a valid bearer token is required"
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
