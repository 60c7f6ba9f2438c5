// Package httpapi is Casebook's HTTP command and query API (gorilla/mux). Handlers authenticate,
// decode and validate, then call the command and query layers; authorization decisions live in the
// domain, and errors map to statuses in one function (statusOf).
package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"log/slog"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/buildinfo"
	"github.com/casebook/casebook/internal/flatjson"
	"github.com/casebook/casebook/internal/routelog"
	"github.com/casebook/casebook/queries"
	"github.com/casebook/casebook/tenancy"
)

//go:embed openapi.json
var openAPI []byte

// Limits on request bodies.
const (
	MaxPublicBody   = 64 << 10
	MaxOperatorBody = 64 << 10
	// MaxConsistencyWait bounds how long a read waits for the query model to reach a position.
	MaxConsistencyWait = 5 * time.Second
)

// Projection is what the API needs of the query-model subscriber.
type Projection interface {
	WaitFor(ctx context.Context, p eventstore.Position) error
}

// Server serves the API.
type Server struct {
	Commands   commands.Executor
	Reader     *queries.Reader
	Tenancy    *tenancy.Store
	QueryModel Projection
	// Head returns the log's head, for reads that ask for consistent=true.
	Head func(context.Context) (eventstore.Position, error)
	// Audit records a valid token refused because its principal is disabled (command
	// "api_request", code principal_disabled); nil records nothing.
	Audit commands.AuditSink
	// Ready reports whether required subscribers are caught up; nil means ready.
	Ready  func() error
	Logger *slog.Logger
	// Admin serves the admin routes; nil disables them.
	Admin Admin
	// Metrics serves /metrics (Prometheus); nil disables it. RequestMetrics, if set, counts requests.
	Metrics        http.Handler
	RequestMetrics *RequestMetrics
	// Public configures the public intake; Handler resolves it once.
	Public PublicConfig
	public *publicState
	// Secret is the instance secret (the same on every replica): cursors and read-your-writes
	// positions are sealed under keys derived from it. Empty: a random one per process.
	Secret []byte
	tokens *tokens
	// Slack serves the effect routes and the detail's "slack" block; nil disables them.
	Slack Slack
	// SlackOAuth serves the OAuth v2 install routes; nil or not Enabled answers 404.
	SlackOAuth SlackOAuth
	// SlackEscalation serves /v1/admin/slack/escalation; nil answers 404.
	SlackEscalation SlackEscalation
	// SlackCallbacks serves /slack/interactions and /slack/events; nil disables them.
	SlackCallbacks SlackCallbacks
	// Console serves /console/… and /inquiries/r/{receipt}; nil disables them.
	Console http.Handler
	// Now is the clock for default ranges (time.Now if nil).
	Now func() time.Time
	// Attachments stores inquiries' files within AttachmentLimits; Load reads an inquiry (its
	// submitter) for the upload's permission check. Either nil disables the attachment routes.
	Attachments      AttachmentStore
	AttachmentLimits commands.AttachmentLimits
	// Uploads bounds concurrent uploads and uploaded bytes per principal and tenant.
	Uploads UploadLimits
	uploads *uploadGate
	Load    func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*domain.Inquiry, error)
	// Portal serves the authenticated intake's reads (/v1/portal/…); nil answers 404 there.
	Portal Portal
	// Due serves the due-job admin routes, the SLA policy and the detail's "sla" and
	// "pending_jobs"; nil disables them.
	Due Due
	// Requesters serves GET /v1/admin/requesters (the blind index); nil answers 404.
	Requesters Requesters
	// RetentionPolicy reads a tenant's retention policy for GET /v1/admin/retention-policy
	// (domain.ErrNotFound when none); nil answers 404.
	RetentionPolicy func(ctx context.Context, tenant domain.TenantID) (*domain.RetentionPolicy, error)
}

// Handler returns the routed API.
func (s *Server) Handler() http.Handler {
	s.public = newPublicState(s.Public)
	s.tokens = newTokens(s.Secret)
	s.uploads = newUploadGate(s.Uploads, s.Public.Now)
	return s.withRequestID(s.router())
}

func (s *Server) router() *mux.Router {
	r := mux.NewRouter()
	r.Use(recordRoute, s.checkQuery)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &apiError{http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed"})
	})
	r.HandleFunc("/healthz", s.healthz).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.readyz).Methods(http.MethodGet)
	r.HandleFunc("/v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	}).Methods(http.MethodGet)
	s.publicRoutes(r)
	if s.Metrics != nil {
		r.Handle("/metrics", s.Metrics).Methods(http.MethodGet)
	}
	s.adminRoutes(r)
	s.slackOAuthRoutes(r)
	s.slackCallbackRoutes(r)
	s.portalRoutes(r)
	s.attachmentRoutes(r)

	a := r.PathPrefix("/v1/inquiries").Subrouter()
	a.Use(s.authenticate)
	a.HandleFunc("", s.listInquiries).Methods(http.MethodGet)
	a.HandleFunc("/{id}", s.getInquiry).Methods(http.MethodGet)
	a.HandleFunc("/{id}/timeline", s.timeline).Methods(http.MethodGet)
	a.HandleFunc("/{id}/transitions", s.transition).Methods(http.MethodPost)
	a.HandleFunc("/{id}/claim", s.claim).Methods(http.MethodPost)
	a.HandleFunc("/{id}/assignment", s.assign).Methods(http.MethodPost)
	a.HandleFunc("/{id}/notes", s.addNote).Methods(http.MethodPost)
	st := r.PathPrefix("/v1/stats").Subrouter()
	st.Use(s.authenticate)
	st.HandleFunc("", s.stats).Methods(http.MethodGet)
	s.consoleRoutes(r)
	s.dueInquiryRoutes(a)
	s.attachmentReadRoutes(a)
	s.lifecycleRoutes(a)
	return r
}

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyPrincipal
)

// recordRoute stores the matched route template for the request log line.
func recordRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := mux.CurrentRoute(r); m != nil {
			tmpl, _ := m.GetPathTemplate()
			routelog.Set(r.Context(), tmpl)
		}
		next.ServeHTTP(w, r)
	})
}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(keyRequestID).(string)
	return id
}

// knownMethods are the methods the API may route; anything else is refused before routing (501, as
// RFC 9110 §15.6.2 says for a method the server does not recognise) and counted as OTHER.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// methodLabel is r's method if known, else "OTHER": metric series and log fields take values from
// fixed sets only, whatever a client sends.
func methodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "OTHER"
}

// statusClass is the metric label of a status: "2xx", "4xx", …
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

// MaxLogField bounds any log field or error message copied from a request (a field name, a
// header's value), in bytes.
const MaxLogField = 64

// truncate cuts s to at most MaxLogField bytes, on a rune boundary, marking the cut with "…".
func truncate(s string) string {
	if len(s) <= MaxLogField {
		return s
	}
	cut := MaxLogField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// withRequestID gives every request an opaque id (echoed in X-Request-Id) and logs one line per
// request without bodies, headers or query strings, which may hold personal data. Every field of the
// line and every metric label comes from a fixed set (method or OTHER, route template, status).
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := "req_" + hex.EncodeToString(b[:])
		w.Header().Set("X-Request-Id", id)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		route := "unmatched"
		ctx := routelog.With(context.WithValue(r.Context(), keyRequestID, id), &route)
		if knownMethods[r.Method] {
			next.ServeHTTP(rec, r.WithContext(ctx))
		} else {
			s.writeError(rec, r.WithContext(ctx), &apiError{http.StatusNotImplemented, "method_not_implemented", "method not implemented"})
		}
		elapsed := time.Since(start)
		method := methodLabel(r.Method)
		s.logger().InfoContext(r.Context(), "http request", "request_id", id, "method", method, "route", route,
			"status", rec.status, "duration_ms", elapsed.Milliseconds())
		if m := s.RequestMetrics; m != nil {
			m.requests.WithLabelValues(route, method, statusClass(rec.status)).Inc()
			m.duration.WithLabelValues(route).Observe(elapsed.Seconds())
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (flushes and deadlines of the
// console's server-sent events).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// authenticate admits principals allowed to read the tenant's inquiries (viewers, operators,
// admins); every operator route needs at least that. Anything else, an integration's token
// included, is refused (403) before the handler runs: new roles fail closed here.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return s.authenticateFor(domain.ActRead, next)
}

// authenticateFor admits a bearer token whose principal may perform act.
func (s *Server) authenticateFor(act domain.Action, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			s.writeError(w, r, domain.ErrUnauthenticated)
			return
		}
		p, err := s.Tenancy.Authenticate(r.Context(), token)
		if errors.Is(err, domain.ErrPrincipalDisabled) && s.Audit != nil {
			e := commands.AuditEntry{RequestID: requestID(r.Context()), Tenant: p.TenantID, Actor: p.ID, Command: "api_request",
				Outcome: commands.OutcomeRefused, Code: commands.ErrorCode(err), At: s.now().UTC()}
			if aerr := s.Audit.Record(context.WithoutCancel(r.Context()), e); aerr != nil {
				s.logger().ErrorContext(r.Context(), "audit write failed", "request_id", e.RequestID, "err", aerr)
			}
		}
		if err == nil {
			err = domain.Authorize(p, act)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyPrincipal, p)))
	})
}

// bearerToken reads "Bearer <token>" from an Authorization header. The scheme name is
// case-insensitive (RFC 9110 §11.1); one or more spaces separate it from the token.
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimLeft(token, " ")
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != "" && !strings.ContainsAny(token, " \t")
}

func principal(r *http.Request) domain.Principal {
	p, _ := r.Context().Value(keyPrincipal).(domain.Principal)
	return p
}

// healthz answers that the process is up, with its build (version, commit, Go version).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
		buildinfo.Info
	}{"ok", buildinfo.Read()})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.Ready != nil {
		if err := s.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "reason": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// decode reads one JSON object from a body of at most limit bytes. The media type must be exactly
// application/json (a charset parameter may say utf-8); every key must be one of v's documented
// fields, spelled exactly, and appear once at every level: encoding/json alone would take the last
// of two duplicates and match keys case-insensitively, so two parsers could read one body two ways.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if !isJSON(r.Header.Get("Content-Type")) {
		return &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "body must be application/json (charset utf-8)"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{http.StatusRequestEntityTooLarge, "body_too_large", "body exceeds " + strconv.FormatInt(limit, 10) + " bytes"}
		}
		return badRequest("could not read body")
	}
	return decodeBytes(body, v)
}

// decodeBytes decodes one JSON object with documented fields only into v.
func decodeBytes(body []byte, v any) error {
	if err := checkKeys(body, jsonFields(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("body must be a JSON object with documented fields only: " + jsonProblem(err))
	}
	if dec.More() {
		return badRequest("body must hold exactly one JSON object")
	}
	return nil
}

// jsonProblem describes a decoding error without echoing the input. Unknown fields were refused
// by checkKeys before decoding.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "field " + strconv.Quote(truncate(te.Field)) + " has the wrong type"
	}
	return "malformed JSON"
}

// isJSON accepts application/json, optionally with charset=utf-8, and nothing else.
func isJSON(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// fieldSets caches jsonFields by type: reflect.Type → map[string]bool, never written after.
var fieldSets sync.Map

// jsonFields are the JSON names of the fields of the struct v points to. The map is shared: read
// it only.
func jsonFields(v any) map[string]bool {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if m, ok := fieldSets.Load(t); ok {
		return m.(map[string]bool)
	}
	m, _ := fieldSets.LoadOrStore(t, structFields(t))
	return m.(map[string]bool)
}

func structFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = t.Field(i).Name
		}
		if name != "-" {
			out[name] = true
		}
	}
	return out
}

// checkKeys refuses a top-level key that is not in fields (exact spelling), and in every object a
// key given twice or two keys that differ only in case. It reads up to the end of the first value;
// what follows is left to the decoder. A flat body (flatjson's: what public intake sends) is read
// without encoding/json's tokenizer, with the same outcome (FuzzCheckKeysFlat).
func checkKeys(body []byte, fields map[string]bool) error {
	if handled, err := checkFlatKeys(body, fields); handled {
		return err
	}
	return checkKeysTokens(body, fields)
}

// checkFlatKeys is checkKeys for a body flatjson reads, in the same order; handled is false when
// it does not read body, and the caller must then check it another way.
func checkFlatKeys(body []byte, fields map[string]bool) (handled bool, err error) {
	var seen [16][]byte // the keys so far: top-level ones, and nested ones as "outer.inner"
	keys := seen[:0]
	handled = flatjson.Each(body, func(key, _ []byte, _ flatjson.Kind) {
		if err != nil {
			return
		}
		if bytes.IndexByte(key, '.') < 0 && !fields[string(key)] {
			err = unknownField(string(key))
			return
		}
		for _, k := range keys {
			if sameFolded(k, key) {
				_, inner, _ := bytes.Cut(key, []byte("."))
				if inner == nil {
					inner = key
				}
				err = repeatedField(string(inner))
				return
			}
		}
		keys = append(keys, key)
	})
	return handled, err
}

// unknownField and repeatedField are checkKeys' refusals, on either path.
func unknownField(key string) error {
	return badRequest("body must be a JSON object with documented fields only: unknown field " + strconv.Quote(truncate(key)))
}

func repeatedField(key string) error {
	return badRequest("field " + strconv.Quote(truncate(key)) + " given more than once (keys are compared ignoring case)")
}

// sameFolded reports whether strings.ToLower makes a and b equal.
func sameFolded(a, b []byte) bool {
	ascii := func(s []byte) bool {
		for _, c := range s {
			if c >= utf8.RuneSelf {
				return false
			}
		}
		return true
	}
	if !ascii(a) || !ascii(b) {
		// Not EqualFold: checkKeysTokens compares ToLower forms, and EqualFold also folds ſ to s.
		return strings.ToLower(string(a)) == strings.ToLower(string(b)) //nolint:staticcheck // SA6005, as above
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// checkKeysTokens is checkKeys for any body, with encoding/json's tokenizer.
func checkKeysTokens(body []byte, fields map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	type object struct{ keys map[string]bool }
	var stack []*object // nil entries stand for arrays
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return badRequest("body must be a JSON object with documented fields only: malformed JSON")
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &object{keys: map[string]bool{}})
				expectKey = true
				continue
			case '[':
				stack = append(stack, nil)
			case '}', ']':
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return nil
				}
			}
		case string:
			if expectKey {
				o := stack[len(stack)-1]
				folded := strings.ToLower(t)
				if len(stack) == 1 && !fields[t] {
					return unknownField(t)
				}
				if o.keys[folded] {
					return repeatedField(t)
				}
				o.keys[folded] = true
				expectKey = false
				continue
			}
		}
		// After a value: the next token of an object is a key.
		expectKey = len(stack) > 0 && stack[len(stack)-1] != nil
	}
}

// waitConsistent honours a read-your-writes request by waiting, boundedly, for the query model to
// reach a position: the one named by the Casebook-Min-Position header or min_position parameter, or
// with consistent=true the log's head when the request arrived.
func (s *Server) waitConsistent(r *http.Request) error {
	raw := r.Header.Get("Casebook-Min-Position")
	if v := r.URL.Query().Get("min_position"); v != "" {
		raw = v
	}
	var p eventstore.Position
	var err error
	switch {
	case raw != "":
		if p, err = s.tokens.openPosition(principal(r).TenantID, raw); err != nil {
			return err
		}
	case r.URL.Query().Get("consistent") == "true" && s.Head != nil:
		if p, err = s.Head(r.Context()); err != nil {
			return err
		}
	default:
		return nil
	}
	if s.QueryModel == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), MaxConsistencyWait)
	defer cancel()
	if err := s.QueryModel.WaitFor(ctx, p); err != nil {
		return &apiError{http.StatusServiceUnavailable, "projection_lagging", "the query model has not reached the requested position yet; retry"}
	}
	return nil
}

func (s *Server) read(w http.ResponseWriter, r *http.Request) (domain.Principal, bool) {
	p := principal(r)
	if err := domain.Authorize(p, domain.ActRead); err != nil {
		s.writeError(w, r, err)
		return p, false
	}
	if err := s.waitConsistent(r); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		s.writeError(w, r, err)
		return p, false
	}
	return p, true
}

func (s *Server) listInquiries(w http.ResponseWriter, r *http.Request) {
	p, ok := s.read(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := queries.Filter{Owner: domain.PrincipalID(q.Get("owner")), Team: q.Get("team"), Receipt: q.Get("receipt"),
		Subject: q.Get("subject")}
	var err error
	if v := q.Get("status"); v != "" {
		if f.Status, err = domain.ParseStatus("status", v); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if v := q.Get("priority"); v != "" {
		if f.Priority, err = domain.ParsePriority("priority", v); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 {
			s.writeError(w, r, domain.Invalid("limit", "must be between 1 and %d", queries.MaxLimit))
			return
		}
	}
	if err := clockFilter(q, &f); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := archivedFilter(q, &f); err != nil {
		s.writeError(w, r, err)
		return
	}
	if c := q.Get("cursor"); c != "" {
		if f.Cursor, err = s.tokens.openCursor(p.TenantID, f, c); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	items, next, err := s.Reader.List(r.Context(), p.TenantID, f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if items == nil {
		items = []queries.Inquiry{}
	}
	body := map[string]any{"items": items, "next_cursor": nil}
	if next != "" {
		body["next_cursor"] = s.tokens.sealCursor(p.TenantID, f, next)
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) getInquiry(w http.ResponseWriter, r *http.Request) {
	p, ok := s.read(w, r)
	if !ok {
		return
	}
	// One statement reads the inquiry, its clock and whether its Slack state, due jobs and
	// attachments hold anything; only the parts that do are read on their own.
	d, err := s.Reader.Detail(r.Context(), p.TenantID, domain.InquiryID(mux.Vars(r)["id"]),
		queries.DetailParts{Slack: s.Slack != nil, Due: s.Due != nil, Attachments: s.Attachments != nil})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := d.Inquiry
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(q.Version, 10)))
	writeJSON(w, http.StatusOK, s.withAttachments(r.Context(), p.TenantID, q.ID, d.Attachments,
		s.withDue(r.Context(), p.TenantID, q.ID, d, s.withSlack(r.Context(), p.TenantID, q.ID, d.Slack, q))))
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	p, ok := s.read(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	if err := onlyParams(q, timelineParams); err != nil {
		s.writeError(w, r, err)
		return
	}
	var limit int
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > queries.MaxTimelineLimit {
			s.writeError(w, r, domain.Invalid("limit", "must be between 1 and %d", queries.MaxTimelineLimit))
			return
		}
		limit = n
	}
	var after uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			s.writeError(w, r, domain.Invalid("after", "must be a version (the next of the previous page)"))
			return
		}
		after = n
	}
	items, next, err := s.Reader.TimelinePage(r.Context(), p.TenantID, domain.InquiryID(mux.Vars(r)["id"]), after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := map[string]any{"items": items}
	if next != 0 {
		out["next"] = next
	}
	writeJSON(w, http.StatusOK, out)
}

// timelineParams are the timeline route's query parameters.
var timelineParams = map[string]bool{"limit": true, "after": true, "consistent": true, "min_position": true}

// target builds a command target from the request. required says whether If-Match must be present.
func target(r *http.Request, required bool) (commands.Target, error) {
	p := principal(r)
	t := commands.Target{
		Tenant: p.TenantID, InquiryID: domain.InquiryID(mux.Vars(r)["id"]), Actor: p,
		IdempotencyKey: r.Header.Get("Idempotency-Key"), CorrelationID: requestID(r.Context()),
	}
	if len(r.Header.Values("If-Match")) == 0 {
		if required {
			return t, domain.ErrPreconditionRequired
		}
		return t, nil
	}
	v, star, err := parseIfMatch(strings.Join(r.Header.Values("If-Match"), ","))
	if err != nil {
		return t, err
	}
	if !star {
		t.IfVersion = &v
	}
	return t, nil
}

// noVersion is a version no inquiry has: a condition that never holds.
const noVersion = ^uint64(0)

// parseIfMatch reads If-Match as RFC 9110 §13.1.1 defines it, with strong comparison: "*" matches any
// existing inquiry (star); a strong tag "N" matches version N; a weak tag (W/"N") or an opaque tag
// that is not a version never matches (noVersion, answered 412). Casebook keeps one condition per
// command, so a list may hold at most one strong version tag. Unquoted or malformed values are 400.
func parseIfMatch(h string) (v uint64, star bool, err error) {
	bad := badRequest(`If-Match must be "*" or the inquiry's version as a quoted strong entity tag, as in its ETag ("3")`)
	h = strings.Trim(h, " \t")
	if h == "*" {
		return 0, true, nil
	}
	v, versions := noVersion, 0
	for _, tag := range strings.Split(h, ",") {
		tag = strings.Trim(tag, " \t")
		weak := strings.HasPrefix(tag, "W/")
		opaque := strings.TrimPrefix(tag, "W/")
		if len(opaque) < 2 || opaque[0] != '"' || opaque[len(opaque)-1] != '"' {
			return 0, false, bad
		}
		inner := opaque[1 : len(opaque)-1]
		for i := 0; i < len(inner); i++ {
			if c := inner[i]; c < 0x21 || c == '"' || c == 0x7f {
				return 0, false, bad
			}
		}
		if weak {
			continue // weak tags never match under strong comparison
		}
		n, err := strconv.ParseUint(inner, 10, 64)
		if err != nil || strconv.FormatUint(n, 10) != inner {
			continue // an opaque tag of ours is always a canonical version: this one matches nothing
		}
		if versions++; versions > 1 {
			return 0, false, badRequest("If-Match may name one version")
		}
		v = n
	}
	return v, false, nil
}

// writeResult answers a command's result; the position is an opaque token of the caller's tenant.
func (s *Server) writeResult(w http.ResponseWriter, r *http.Request, res commands.Result) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(res.Version, 10)))
	pos := ""
	if res.Position != (eventstore.Position{}) {
		pos = s.tokens.sealPosition(principal(r).TenantID, res.Position)
		w.Header().Set("Casebook-Position", pos)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": res.InquiryID, "version": res.Version, "position": pos})
}

type transitionBody struct {
	To       string `json:"to"`
	Reason   string `json:"reason"`
	Priority string `json:"priority"`
}

// command runs one operator command: its target (If-Match required or optional), its JSON body
// decoded into body (nil: the command takes none), then run; it answers the result or the error.
func (s *Server) command(w http.ResponseWriter, r *http.Request, ifMatchRequired bool, body any, run func(commands.Target) (commands.Result, error)) {
	t, err := target(r, ifMatchRequired)
	if err == nil && body != nil {
		err = decode(w, r, MaxOperatorBody, body)
	}
	var res commands.Result
	if err == nil {
		res, err = run(t)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeResult(w, r, res)
}

func (s *Server) transition(w http.ResponseWriter, r *http.Request) {
	var in transitionBody
	s.command(w, r, true, &in, func(t commands.Target) (commands.Result, error) {
		c := commands.Transition{Target: t, Reason: in.Reason}
		var err error
		if c.To, err = domain.ParseStatus("to", in.To); err != nil {
			return commands.Result{}, err
		}
		if in.Priority != "" {
			if c.Priority, err = domain.ParsePriority("priority", in.Priority); err != nil {
				return commands.Result{}, err
			}
		}
		return s.Commands.Transition(r.Context(), c)
	})
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	s.command(w, r, false, nil, func(t commands.Target) (commands.Result, error) {
		return s.Commands.Claim(r.Context(), commands.Claim{Target: t})
	})
}

func (s *Server) assign(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Owner string `json:"owner"`
	}
	s.command(w, r, true, &in, func(t commands.Target) (commands.Result, error) {
		return s.Commands.Assign(r.Context(), commands.Assign{Target: t, Owner: domain.PrincipalID(in.Owner)})
	})
}

func (s *Server) addNote(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body string `json:"body"`
	}
	s.command(w, r, false, &in, func(t commands.Target) (commands.Result, error) {
		return s.Commands.AddNote(r.Context(), commands.AddNote{Target: t, Body: in.Body})
	})
}
