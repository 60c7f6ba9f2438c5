// Package console is the operator console: server-rendered pages under /console (html/template,
// assets embedded, no JavaScript needed for any flow; a small script adds live updates). It calls
// the command and query layers exactly as the HTTP API does: every command goes through the
// audited executor, where the domain decides role, team and tenant; every read is scoped to the
// signed-in principal's tenant.
//
// Sign-in exchanges an operator token for a server-side session (tenancy.StartSession): the cookie
// holds only the session's random secret and is HttpOnly, SameSite=Lax (a link from Slack is a
// cross-site navigation and must carry it; Lax never sends it on cross-site POSTs) and Secure
// whenever the request came over TLS or the console is configured as public over https. Every
// request re-checks the session and its token, so revoking the token ends the session. Every form
// carries the session's CSRF token, and every POST is also refused when the browser reports a
// cross-origin request (http.CrossOriginProtection).
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/clientaddr"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/internal/routelog"
	"github.com/casebook/casebook/internal/seal"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/queries"
	"github.com/casebook/casebook/tenancy"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Projection is what the console needs of the query-model subscriber: read-your-writes after an
// action, and its health for the stale-projection banner.
type Projection interface {
	WaitFor(ctx context.Context, p eventstore.Position) error
	Status() projections.Status
}

// Admin is the projection administration the admin pages offer (the same as the API's).
type Admin interface {
	ProjectionStatuses() []projections.Status
	Parked(ctx context.Context, projection string, tenant domain.TenantID) ([]projections.Parked, error)
	RetryParked(ctx context.Context, projection string, tenant domain.TenantID, stream string, skip bool) (*projections.Parked, error)
}

// Console serves the pages. Commands, Reader, Tenancy and QueryModel are required.
type Console struct {
	Commands   commands.Executor
	Reader     *queries.Reader
	Tenancy    *tenancy.Store
	QueryModel Projection
	// Head is the log's head, awaited before a conflict is explained (nil: no wait).
	Head  func(context.Context) (eventstore.Position, error)
	Admin Admin
	// Slack reads and recovers Slack effects; nil hides the Slack parts.
	Slack Slack
	// Due reads and reviews due jobs (follow-ups, SLA timers); nil hides them.
	Due Due
	// Attachments lists and serves inquiries' files; nil hides them.
	Attachments Attachments
	// AdminAudit records admin actions with their reasons.
	AdminAudit *commands.AdminAudit
	// Audit records sign-ins refused because the token's principal is disabled (command
	// "console_signin", code principal_disabled, the principal as actor; never the token or the
	// client's address), beside the commands' refusals; nil records nothing.
	Audit  commands.AuditSink
	Logger *slog.Logger
	Now    func() time.Time
	// SessionTTL bounds a session (DefaultSessionTTL if zero); a token that expires first ends it.
	SessionTTL time.Duration
	// SecureCookies marks cookies Secure even on plain-HTTP requests (the console is served over
	// https behind a proxy that terminates TLS).
	SecureCookies bool
	// PollInterval is how often live updates look for changes (DefaultPollInterval if zero).
	PollInterval time.Duration
	// Secret is the instance secret; the read-your-writes position a redirect carries is sealed
	// under a key derived from it, for the session's tenant (random per process when empty).
	Secret []byte
	// SignInRate bounds sign-in attempts per client address, successful or not
	// (DefaultSignInRate if zero; Off disables it).
	SignInRate ratelimit.Rate
	// TrustedProxies are the peers whose X-Forwarded-For names the client, as on the public intake.
	TrustedProxies []netip.Prefix

	positions   *seal.AEAD
	signInLimit *ratelimit.Keyed
	addrKey     []byte

	once   sync.Once
	pages  map[string]*template.Template
	router http.Handler
	done   chan struct{}
	closed sync.Once
}

// DefaultSignInRate allows a client address ten sign-in attempts a minute: enough for people who
// mistype, and it makes each guess cost a token lookup at a bounded rate.
var DefaultSignInRate = ratelimit.Rate{Events: 10, Per: time.Minute, Burst: 10}

// Defaults.
const (
	DefaultSessionTTL   = 12 * time.Hour
	DefaultPollInterval = time.Second
	// maxWait bounds read-your-writes after an action.
	maxWait   = 5 * time.Second
	maxForm   = 64 << 10
	streamFor = 10 * time.Minute
)

// Cookie names. Over TLS the __Host- prefix pins the cookie to this host and path /.
const (
	cookieName       = "casebook_session"
	secureCookieName = "__Host-casebook_session"
)

// Close ends live-update streams (call it when the server shuts down).
func (c *Console) Close() {
	c.init()
	c.closed.Do(func() { close(c.done) })
}

func (c *Console) init() {
	c.once.Do(func() {
		if c.Logger == nil {
			c.Logger = slog.Default()
		}
		if c.Now == nil {
			c.Now = time.Now
		}
		if c.SessionTTL == 0 {
			c.SessionTTL = DefaultSessionTTL
		}
		if c.PollInterval == 0 {
			c.PollInterval = DefaultPollInterval
		}
		secret := c.Secret
		if len(secret) == 0 {
			secret = make([]byte, 32)
			_, _ = rand.Read(secret)
		}
		var err error
		if c.positions, err = seal.New(secret, "casebook/console position v1"); err != nil {
			panic(err) // only for an impossible key length
		}
		if c.SignInRate == (ratelimit.Rate{}) {
			c.SignInRate = DefaultSignInRate
		}
		c.signInLimit = ratelimit.New(c.SignInRate, c.Now)
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("casebook/console sign-in client v1"))
		c.addrKey = m.Sum(nil)
		c.done = make(chan struct{})
		c.pages = parsePages()
		c.router = c.routes()
	})
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.init()
	c.router.ServeHTTP(w, r)
}

func (c *Console) routes() http.Handler {
	// Forms post only from this origin; the synchronizer token (csrf field) is checked per route.
	return http.NewCrossOriginProtection().Handler(c.mux())
}

func (c *Console) mux() *mux.Router {
	r := mux.NewRouter()
	r.Use(c.checkQuery)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
	r.Use(func(next http.Handler) http.Handler { // the request log line names the console's route
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if m := mux.CurrentRoute(r); m != nil {
				tmpl, _ := m.GetPathTemplate()
				routelog.Set(r.Context(), tmpl)
			}
			next.ServeHTTP(w, r)
		})
	})
	static, _ := fs.Sub(staticFS, "static")
	r.PathPrefix("/console/static/").Handler(http.StripPrefix("/console/static/", staticHandler(static)))
	r.HandleFunc("/console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/inbox", http.StatusSeeOther)
	}).Methods(http.MethodGet)
	r.HandleFunc("/console/signin", c.signinPage).Methods(http.MethodGet)
	r.HandleFunc("/console/signin", c.signin).Methods(http.MethodPost)
	r.HandleFunc("/console/signout", c.authed(c.signout)).Methods(http.MethodPost)
	r.HandleFunc("/inquiries/r/{receipt}", c.authed(c.byReceipt)).Methods(http.MethodGet)
	r.HandleFunc("/console/inbox", c.authed(c.inbox)).Methods(http.MethodGet)
	r.HandleFunc("/console/events", c.authed(c.events)).Methods(http.MethodGet)
	r.HandleFunc("/console/dashboard", c.authed(c.dashboard)).Methods(http.MethodGet)
	r.HandleFunc("/console/inquiries/{id}", c.authed(c.inquiry)).Methods(http.MethodGet)
	r.HandleFunc("/console/inquiries/{id}/{action}", c.authed(c.act)).Methods(http.MethodPost)
	r.HandleFunc("/console/inquiries/{id}/attachments/{attachment_id}", c.authed(c.attachment)).Methods(http.MethodGet)
	r.HandleFunc("/console/admin", c.authed(c.admin)).Methods(http.MethodGet)
	r.HandleFunc("/console/admin/{area}/{op}", c.authed(c.adminAct)).Methods(http.MethodPost)
	return r
}

// pageParams are the query parameters each page reads, by method and route template: the one
// allow-list of the console's routes (checkQuery). A route not listed takes none.
var pageParams = map[string][]string{
	"GET /console/signin": {"next", "signed_out"},
	// The API's list filters, plus q (a receipt or words of a subject).
	"GET /console/inbox":          {"status", "owner", "priority", "team", "q", "cursor", "breached", "due_before", "archived"},
	"GET /console/events":         {"inquiry", "since"},
	"GET /console/dashboard":      {"from", "to"},
	"GET /console/inquiries/{id}": {"after", "done", "from"},
	"GET /console/admin":          {"done"},
}

// PageParams returns the query parameters method on the route template takes (nil: none).
func PageParams(method, template string) []string { return pageParams[method+" "+template] }

// checkQuery refuses (400) a request with a query parameter its route does not take, or one given
// twice, before the page runs: a misspelt filter must not silently show everything.
func (c *Console) checkQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery == "" {
			next.ServeHTTP(w, r)
			return
		}
		tpl := ""
		if m := mux.CurrentRoute(r); m != nil {
			tpl, _ = m.GetPathTemplate()
		}
		allowed := pageParams[r.Method+" "+tpl]
		q := r.URL.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.Contains(allowed, k) || len(q[k]) > 1 {
				msg := "Unknown query parameter " + strconv.Quote(domain.CutRunes(k, 64)) + "."
				if len(q[k]) > 1 && slices.Contains(allowed, k) {
					msg = "The query parameter " + strconv.Quote(k) + " is given more than once."
				}
				c.renderError(w, r, nil, http.StatusBadRequest, msg)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// staticHandler serves the embedded assets with a long cache lifetime.
func staticHandler(f fs.FS) http.Handler {
	fsrv := http.FileServerFS(f)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fsrv.ServeHTTP(w, r)
	})
}

// session is the signed-in principal of a request.
type session struct {
	P    domain.Principal
	S    tenancy.Session
	Name string // the tenant's display name
}

// cookieSecret reads the session cookie of the name this request's scheme sets, and only that
// one: under https only the __Host- cookie, which a sibling domain cannot plant (login fixation),
// and over plain HTTP only the plain one.
func (c *Console) cookieSecret(r *http.Request) string {
	name := cookieName
	if c.secure(r) {
		name = secureCookieName
	}
	if ck, err := r.Cookie(name); err == nil {
		return ck.Value
	}
	return ""
}

// authed resolves the session cookie; without a live session a GET is sent to sign in (and back)
// and anything else is 401.
func (c *Console) authed(next func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, s, err := c.Tenancy.SessionPrincipal(r.Context(), c.cookieSecret(r))
		if err != nil {
			if !errors.Is(err, domain.ErrUnauthenticated) {
				c.renderError(w, r, nil, http.StatusInternalServerError, "")
				c.Logger.ErrorContext(r.Context(), "console session", "request_id", requestID(w), "err", err)
				return
			}
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/console/events") {
				http.Redirect(w, r, "/console/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.renderError(w, r, nil, http.StatusUnauthorized, "Your session has ended. Sign in again.")
			return
		}
		sess := &session{P: p, S: s}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if err := r.ParseForm(); err != nil {
				c.renderError(w, r, sess, http.StatusBadRequest, "The form could not be read.")
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.CSRF)) != 1 {
				c.renderError(w, r, sess, http.StatusForbidden, "This form has expired or did not come from this console. Reload the page and try again.")
				return
			}
		}
		next(w, r, sess)
	}
}

// requestID is the API's request id, which the shared middleware puts in the response headers.
func requestID(w http.ResponseWriter) string { return w.Header().Get("X-Request-Id") }

// home is where sign-in lands when it has no acceptable destination.
const home = "/console/inbox"

// safeNext accepts as a post-sign-in destination only a same-origin absolute path of the console
// (under /console, or a receipt link). Its path, as given and fully percent-decoded, starts with
// one "/" followed by neither "/" nor "\" and has no dot segment; the whole holds no control
// character (browsers drop tabs and line breaks, so "/\t/evil" would become "//evil") and no
// backslash (browsers read it as "/"). Anything else is the inbox.
func safeNext(next string) string {
	if len(next) > 2048 || strings.ContainsFunc(next, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
		return home
	}
	raw := next
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	path := raw
	for range 4 { // one layer of encoding per round; a path still encoded after that is refused
		d, err := url.PathUnescape(path)
		if err != nil {
			return home
		}
		if d == path {
			break
		}
		path = d
	}
	if d, err := url.PathUnescape(path); err != nil || d != path || !utf8.ValidString(path) {
		return home
	}
	for _, p := range []string{raw, path} {
		if len(p) < 2 || p[0] != '/' || p[1] == '/' ||
			strings.ContainsFunc(p, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
			return home
		}
		for seg := range strings.SplitSeq(p, "/") {
			if seg == "." || seg == ".." {
				return home
			}
		}
		if p != "/console" && !strings.HasPrefix(p, "/console/") && !strings.HasPrefix(p, "/inquiries/r/") {
			return home
		}
	}
	return next
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "signin", nil, map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if ok, retry := c.signInLimit.Allow(clientaddr.Key(c.addrKey, clientaddr.Of(r, c.TrustedProxies))); !ok {
		secs := max(1, int(math.Ceil(retry.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.Logger.WarnContext(r.Context(), "console sign-in rate limited", "request_id", requestID(w), "retry_after_s", secs)
		c.render(w, r, http.StatusTooManyRequests, "signin", nil, map[string]any{"Next": next,
			"Error": fmt.Sprintf("Too many sign-in attempts from your network. Try again in %d seconds.", secs)})
		return
	}
	p, s, secret, err := c.Tenancy.StartSession(r.Context(), strings.TrimSpace(r.PostForm.Get("token")), c.SessionTTL)
	if err != nil {
		status := http.StatusUnauthorized
		msg := "That token is not valid: it is unknown, revoked or expired."
		switch {
		case errors.Is(err, domain.ErrPrincipalDisabled):
			status, msg = http.StatusForbidden, "This account is disabled. An admin of your organization can enable it again."
			c.auditSignInRefused(w, r, p, err)
		case errors.Is(err, domain.ErrForbidden):
			status, msg = http.StatusForbidden, "That token belongs to an integration, which cannot sign in to the console."
		case !errors.Is(err, domain.ErrUnauthenticated):
			status, msg = http.StatusInternalServerError, "Something went wrong on our side. Please try again."
			c.Logger.ErrorContext(r.Context(), "console sign-in", "request_id", requestID(w), "err", err)
		}
		c.render(w, r, status, "signin", nil, map[string]any{"Next": next, "Error": msg})
		return
	}
	http.SetCookie(w, c.cookie(r, secret, s.ExpiresAt))
	c.Logger.InfoContext(r.Context(), "console sign-in", "request_id", requestID(w), "principal", string(p.ID))
	http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // safeNext allows only local console paths
}

// auditSignInRefused records a sign-in refused for a disabled principal, as the API records its
// token's refusals: the principal's id and tenant, the request id and the code, nothing personal.
func (c *Console) auditSignInRefused(w http.ResponseWriter, r *http.Request, p domain.Principal, err error) {
	c.Logger.WarnContext(r.Context(), "console sign-in refused", "request_id", requestID(w), "principal", string(p.ID), "code", commands.ErrorCode(err))
	if c.Audit == nil {
		return
	}
	e := commands.AuditEntry{RequestID: requestID(w), Tenant: p.TenantID, Actor: p.ID, Command: "console_signin",
		Outcome: commands.OutcomeRefused, Code: commands.ErrorCode(err), At: c.Now().UTC()}
	if aerr := c.Audit.Record(context.WithoutCancel(r.Context()), e); aerr != nil {
		c.Logger.ErrorContext(r.Context(), "audit write failed", "request_id", e.RequestID, "err", aerr)
	}
}

func (c *Console) secure(r *http.Request) bool { return r.TLS != nil || c.SecureCookies }

func (c *Console) cookie(r *http.Request, value string, expires time.Time) *http.Cookie {
	name := cookieName
	if c.secure(r) {
		name = secureCookieName
	}
	// Secure whenever the browser reaches the console over TLS; a plain-HTTP console (local use)
	// could not keep a Secure cookie at all.
	ck := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteLaxMode, //nolint:gosec // see above
		Expires: expires}
	if value == "" {
		ck.MaxAge = -1
		ck.Expires = time.Unix(0, 0)
	}
	return ck
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, _ *session) {
	if err := c.Tenancy.EndSession(r.Context(), c.cookieSecret(r)); err != nil {
		c.Logger.ErrorContext(r.Context(), "console sign-out", "request_id", requestID(w), "err", err)
	}
	http.SetCookie(w, c.cookie(r, "", time.Time{}))
	http.Redirect(w, r, "/console/signin?signed_out=1", http.StatusSeeOther)
}

// byReceipt is the link in Slack messages: it lands on the inquiry with that receipt, in the
// signed-in principal's tenant only.
func (c *Console) byReceipt(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.allowed(w, r, s, domain.ActRead) {
		return
	}
	receipt := mux.Vars(r)["receipt"]
	items, _, err := c.Reader.List(r.Context(), s.P.TenantID, queries.Filter{Receipt: receipt, Limit: 1})
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	if len(items) == 0 {
		c.renderError(w, r, s, http.StatusNotFound, "No inquiry has that receipt here. If it was just submitted, reload in a moment.")
		return
	}
	http.Redirect(w, r, "/console/inquiries/"+url.PathEscape(string(items[0].ID)), http.StatusSeeOther)
}

// allowed applies the role policy to a page; a refusal renders 403.
func (c *Console) allowed(w http.ResponseWriter, r *http.Request, s *session, act domain.Action) bool {
	if err := domain.Authorize(s.P, act); err != nil {
		c.renderError(w, r, s, http.StatusForbidden, "Your role ("+string(s.P.Role)+") may not do this.")
		return false
	}
	return true
}

// fail renders an error with the API's status (commands.Classify); internal errors are logged,
// not shown.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	code, status, _ := commands.Classify(err)
	msg := messageFor(code, err)
	if status >= http.StatusInternalServerError {
		c.Logger.ErrorContext(r.Context(), "console request failed", "request_id", requestID(w), "err", err)
	}
	c.renderError(w, r, s, status, msg)
}

// messageFor words an error code for people.
func messageFor(code string, err error) string {
	var ve *domain.ValidationError
	var rl *domain.RateLimitError
	switch {
	case errors.As(err, &ve):
		return "Please check " + ve.Field + ": " + ve.Reason + "."
	case errors.As(err, &rl):
		return "Not done: " + rl.Error() + "."
	case code == "not_found":
		return "Not found."
	case code == "forbidden":
		return "Your role or team may not do this."
	case code == "already_claimed":
		return "Someone else has claimed this inquiry."
	case code == "invalid_transition":
		return "That change is not possible from the inquiry's current status."
	case code == "unauthenticated":
		return "Your session has ended. Sign in again."
	case code == "internal":
		return "Something went wrong on our side. Please try again."
	}
	return "The request was refused (" + code + ")."
}

// formValue returns a single-valued form field, trimmed.
func formValue(r *http.Request, k string) string { return strings.TrimSpace(r.PostForm.Get(k)) }

func atoi(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
