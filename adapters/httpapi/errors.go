package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

// errorBody is the one error shape: {"error":{"code":…,"message":…,"request_id":…}}.
type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Field     string `json:"field,omitempty"`
		RequestID string `json:"request_id,omitempty"`
		// CurrentVersion and ChangedBy describe the inquiry after a lost race (412).
		CurrentVersion *uint64 `json:"current_version,omitempty"`
		ChangedBy      string  `json:"changed_by,omitempty"`
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

// statusOf maps an error to its HTTP status and code: the HTTP layer's own errors, else the one
// table of command errors (commands.Classify).
func statusOf(err error) (int, string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status, ae.code
	}
	code, status, _ := commands.Classify(err)
	return status, code
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var body errorBody
	var status int
	var ae *apiError
	if errors.As(err, &ae) {
		status, body.Error.Code, body.Error.Message = ae.status, ae.code, ae.message
	} else {
		body.Error.Code, status, body.Error.Message = commands.Classify(err)
	}
	body.Error.RequestID = requestID(r.Context())
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		body.Error.Field = ve.Field
	}
	var vc *domain.VersionConflictError
	var rl *domain.RateLimitError
	switch {
	case body.Error.Code == commands.StorageFull:
		s.storageFull(w, r, err)
	case status == http.StatusInternalServerError:
		// Internal errors may carry storage details: log them, answer generically.
		s.logger().ErrorContext(r.Context(), "request failed", "request_id", body.Error.RequestID, "err", err)
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="casebook"`)
	case errors.As(err, &vc):
		// A lost race: the current version (also as ETag) and who changed it.
		w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(vc.Version, 10)))
		body.Error.CurrentVersion, body.Error.ChangedBy = &vc.Version, string(vc.ChangedBy)
	case errors.As(err, &rl):
		// Whole seconds, rounded up: a client that waits this long is not refused again.
		w.Header().Set("Retry-After", strconv.FormatInt(int64((rl.RetryAfter+time.Second-1)/time.Second), 10))
	}
	writeJSON(w, status, body)
}

// StorageFullRetryAfter is the Retry-After, in seconds, of a refusal because the disk is full.
const StorageFullRetryAfter = 30

// storageFull logs a refusal because the database's disk is full, for the operator who must free
// space, and asks the client to retry later.
func (s *Server) storageFull(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(StorageFullRetryAfter))
	s.logger().ErrorContext(r.Context(), "storage full: request refused, nothing recorded", "request_id", requestID(r.Context()), "err", err)
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

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
