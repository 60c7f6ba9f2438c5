package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Scopes the fake checks. A token holds all of them unless Options.Scopes says otherwise.
const (
	ScopeChatWrite       = "chat:write"
	ScopeChannelsHistory = "channels:history"
	ScopeListsRead       = "lists:read"
	ScopeListsWrite      = "lists:write"
)

// DefaultRowCap is the per-List row cap when Options.RowCap is 0. Slack's cap
// depends on the plan and is not published per method; 1000 is a guess.
const DefaultRowCap = 1000

// Options configures a Server. The zero value is usable.
type Options struct {
	// Token is the one bot token the fake accepts (default "xoxb-fake-token").
	Token string
	// Scopes granted to Token; nil grants every scope the fake checks.
	Scopes []string

	TeamID    string // default "T0FAKETEAM1"
	TeamName  string // default "Casebook Fake"
	BotUserID string // default "U0FAKEBOT01"
	BotID     string // default "B0FAKEBOT01"
	AppID     string // default "A0FAKEAPP01"

	// Clock drives timestamps, rate-limit windows and TimeoutAfterApply
	// delays. New defaults to SystemClock; NewTestServer to a ManualClock
	// standing at 2023-11-14T22:13:20Z (unix 1700000000).
	Clock Clock

	// RowCap is the default cap on a List's active rows (DefaultRowCap if 0).
	RowCap int
	// ItemsPageMax caps every slackLists.items.list page whatever limit asks
	// (0: the method's own maximum). Slack may answer a cursor page with fewer
	// rows than asked; tests set it small to make a List many pages long.
	ItemsPageMax int
	// RateLimits per method name, e.g. "chat.postMessage".
	RateLimits map[string]RateLimit
	// NonMarketplace applies the limits Slack sets for apps not approved for the Slack
	// Marketplace (https://api.slack.com/changelog/2025-05-terms-rate-limit-update-and-faq,
	// https://api.slack.com/apis/rate-limits): conversations.history answers at most
	// HistoryNonMarketplaceLimit messages per call, whatever limit asks, and allows one call per
	// minute (then ratelimited with Retry-After); so does conversations.replies. RateLimits can
	// still override the budget.
	NonMarketplace bool

	// Channels that exist from the start. Posting elsewhere is channel_not_found
	// unless AutoCreateChannels is set, which creates any C…/G… id on first use.
	Channels           []string
	AutoCreateChannels bool

	// BaseURL is what URL returns for a Server made with New (it does not
	// know where it is served). NewTestServer sets it.
	BaseURL string
}

// Server is a stateful fake of the Slack Web API methods Casebook uses. It is
// an http.Handler serving /api/<method>. All methods are goroutine-safe.
type Server struct {
	opts  Options
	clock Clock

	mu       sync.Mutex
	ids      map[string]int64
	lastTS   int64 // microseconds of the last timestamp handed out
	channels map[string]*channel
	lists    map[string]*list
	pageMax  int // Options.ItemsPageMax, or SetItemsPageMax
	revoked  bool
	scopes   map[string]bool // nil: all

	rules  []*ruleState
	fired  []FiredFault
	calls  []Call
	counts map[string]int

	limits  map[string]RateLimit
	windows map[string]*rateWindow

	hung        int
	hungChanged chan struct{}
	oauth       oauthState
	triggers    map[string]*trigger
	views       []View
	viewOpened  chan struct{} // closed when a view opens

	done      chan struct{}
	closeOnce sync.Once
	srv       *http.Server
	served    chan struct{} // closed when srv has stopped
}

// New returns a fake with no lists and the configured channels.
func New(opts Options) *Server {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&opts.Token, "xoxb-fake-token")
	def(&opts.TeamID, "T0FAKETEAM1")
	def(&opts.TeamName, "Casebook Fake")
	def(&opts.BotUserID, "U0FAKEBOT01")
	def(&opts.BotID, "B0FAKEBOT01")
	def(&opts.AppID, "A0FAKEAPP01")
	if opts.Clock == nil {
		opts.Clock = SystemClock()
	}
	if opts.RowCap <= 0 {
		opts.RowCap = DefaultRowCap
	}
	s := &Server{
		opts:        opts,
		clock:       opts.Clock,
		ids:         map[string]int64{},
		channels:    map[string]*channel{},
		lists:       map[string]*list{},
		pageMax:     opts.ItemsPageMax,
		counts:      map[string]int{},
		limits:      map[string]RateLimit{},
		windows:     map[string]*rateWindow{},
		hungChanged: make(chan struct{}),
		done:        make(chan struct{}),
	}
	if opts.Scopes != nil {
		s.scopes = map[string]bool{}
		for _, sc := range opts.Scopes {
			s.scopes[sc] = true
		}
	}
	if opts.NonMarketplace {
		s.limits["conversations.history"] = RateLimit{Budget: 1, Window: time.Minute}
		s.limits["conversations.replies"] = RateLimit{Budget: 1, Window: time.Minute}
	}
	for m, rl := range opts.RateLimits {
		if rl.Budget > 0 && rl.Window > 0 {
			s.limits[m] = rl
		}
	}
	for _, id := range opts.Channels {
		s.channels[id] = newChannel(id)
	}
	return s
}

// TB is the part of testing.TB that NewTestServer uses. The package imports neither testing nor
// net/http/httptest, so the fake ships in the production binary (casebook dev fake-slack) without
// linking test helpers.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// NewTestServer starts the fake on a loopback port, closed at the end of the
// test. Without a Clock it uses a ManualClock (see Clock).
func NewTestServer(t TB, opts Options) *Server {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = NewManualClock(time.Unix(1700000000, 0).UTC())
	}
	s := New(opts)
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakeslack: listen: %v", err)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.served = make(chan struct{})
	go func() { _ = s.srv.Serve(ln); close(s.served) }()
	s.opts.BaseURL = "http://" + ln.Addr().String() + "/api/"
	t.Cleanup(s.Close)
	return s
}

// URL is the base API URL, ending in "/api/", for slack.OptionAPIURL.
func (s *Server) URL() string { return s.opts.BaseURL }

// Token is the bot token the fake accepts.
func (s *Server) Token() string { return s.opts.Token }

// BotUserID is the user id of the bot that the token belongs to.
func (s *Server) BotUserID() string { return s.opts.BotUserID }

// BotID is the bot id stamped on messages the token posts.
func (s *Server) BotID() string { return s.opts.BotID }

// Clock returns the server's clock (a *ManualClock under NewTestServer unless
// Options.Clock was set).
func (s *Server) Clock() Clock { return s.clock }

// Close releases requests hanging in a TimeoutAfterApply fault and, for a
// test server, shuts the listener down. It is safe to call twice.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	if s.srv != nil {
		_ = s.srv.Close()
		<-s.served
	}
}

// RevokeToken makes every later call answer token_revoked.
func (s *Server) RevokeToken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = true
}

// SetScopes replaces the token's scopes; nil grants all.
func (s *Server) SetScopes(scopes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if scopes == nil {
		s.scopes = nil
		return
	}
	s.scopes = map[string]bool{}
	for _, sc := range scopes {
		s.scopes[sc] = true
	}
}

// Call is one request the server received, whatever its outcome.
type Call struct {
	Seq     int // 1-based, in arrival order
	Method  string
	Channel string // the channel argument, if any
	ListID  string // the list_id argument, if any
	// Status is the HTTP status answered; 0 while a request hangs, or when it
	// was dropped or its client gave up before an answer.
	Status int
	// Error is the Slack error code answered ("" for ok and for non-JSON answers).
	Error string
	// Fault is set when an injected fault answered the call.
	Fault bool
	// Applied is set when the method ran to success and its effect is in the
	// state, whatever the client was told.
	Applied bool
}

// Calls returns every call so far, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount returns how many calls method received, failed and rate-limited ones included.
func (s *Server) CallCount(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[method]
}

// CallCounts returns the call count of every method called so far.
func (s *Server) CallCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// Hung returns how many requests are hanging in a TimeoutAfterApply fault.
func (s *Server) Hung() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hung
}

// WaitHung blocks until at least n requests hang in a TimeoutAfterApply
// fault (their writes are then applied), or ctx ends.
func (s *Server) WaitHung(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		if s.hung >= n {
			s.mu.Unlock()
			return nil
		}
		ch := s.hungChanged
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// apiError is a Slack error answer: HTTP 200, ok=false.
type apiError struct {
	code  string
	extra map[string]any
}

func errCode(code string) *apiError { return &apiError{code: code} }

// request is what a method handler sees.
type request struct {
	p       params
	channel string
	listID  string
}

type handler func(s *Server, req *request) (any, *apiError)

type methodSpec struct {
	scope string
	fn    handler
}

func lookupMethod(name string) (methodSpec, bool) {
	switch name {
	case "auth.test":
		return methodSpec{fn: (*Server).authTest}, true
	case "chat.postMessage":
		return methodSpec{scope: ScopeChatWrite, fn: (*Server).chatPostMessage}, true
	case "chat.update":
		return methodSpec{scope: ScopeChatWrite, fn: (*Server).chatUpdate}, true
	case "chat.delete":
		return methodSpec{scope: ScopeChatWrite, fn: (*Server).chatDelete}, true
	case "bots.info":
		return methodSpec{scope: ScopeUsersRead, fn: (*Server).botsInfo}, true
	case "conversations.info":
		return methodSpec{scope: ScopeChannelsRead, fn: (*Server).conversationsInfo}, true
	case "views.open":
		return methodSpec{fn: (*Server).viewsOpen}, true
	case "chat.getPermalink":
		return methodSpec{fn: (*Server).chatGetPermalink}, true
	case "conversations.history":
		return methodSpec{scope: ScopeChannelsHistory, fn: (*Server).conversationsHistory}, true
	case "conversations.replies":
		return methodSpec{scope: ScopeChannelsHistory, fn: (*Server).conversationsReplies}, true
	case "slackLists.create":
		return methodSpec{scope: ScopeListsWrite, fn: (*Server).listsCreate}, true
	case "slackLists.access.set":
		return methodSpec{scope: ScopeListsWrite, fn: (*Server).accessSet}, true
	case "slackLists.items.create":
		return methodSpec{scope: ScopeListsWrite, fn: (*Server).itemsCreate}, true
	case "slackLists.items.update":
		return methodSpec{scope: ScopeListsWrite, fn: (*Server).itemsUpdate}, true
	case "slackLists.items.delete":
		return methodSpec{scope: ScopeListsWrite, fn: (*Server).itemsDelete}, true
	case "slackLists.items.info":
		return methodSpec{scope: ScopeListsRead, fn: (*Server).itemsInfo}, true
	case "slackLists.items.list":
		return methodSpec{scope: ScopeListsRead, fn: (*Server).itemsList}, true
	}
	return methodSpec{}, false
}

// answer is what the handler decided, written after the lock is released.
type answer struct {
	status     int
	body       any
	retryAfter int
	html       bool
}

// ServeHTTP serves POST or GET /api/<method> with form, query or JSON
// arguments. Order of checks: injected fault, then auth, scope, rate limit,
// and the method itself.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	p, perr := parseParams(r)
	if name == "oauth.v2.access" && perr == nil {
		s.mu.Lock()
		a := s.oauthV2AccessLocked(p)
		s.mu.Unlock()
		writeAnswer(w, a)
		return
	}
	req := &request{p: p, channel: p.str("channel"), listID: p.str("list_id")}

	s.mu.Lock()
	seq := len(s.calls) + 1
	s.calls = append(s.calls, Call{Seq: seq, Method: name, Channel: req.channel, ListID: req.listID})
	s.counts[name]++
	call := &s.calls[seq-1]

	fault, faulted := s.takeFaultLocked(seq, name, req.channel, req.listID)
	if faulted && !fault.applies() {
		a := s.faultAnswerLocked(fault, name)
		call.Fault, call.Status, call.Error = true, a.status, a.errorCode()
		s.mu.Unlock()
		writeAnswer(w, a)
		return
	}

	var a answer
	if perr != nil {
		a = errorAnswer(errCode(CodeInvalidArguments))
	} else {
		a = s.dispatchLocked(name, req, faulted, call)
	}
	if faulted {
		call.Fault = true
		s.mu.Unlock()
		s.afterApply(w, r, fault, seq)
		return
	}
	call.Status, call.Error = a.status, a.errorCode()
	s.mu.Unlock()
	writeAnswer(w, a)
}

func (s *Server) dispatchLocked(name string, req *request, faulted bool, call *Call) answer {
	spec, known := lookupMethod(name)
	if !known {
		return errorAnswer(errCode(CodeUnknownMethod))
	}
	if e := s.authorizeLocked(req.p.token, spec.scope); e != nil {
		return errorAnswer(e)
	}
	if !faulted {
		if wait, ok := s.admitLocked(name); !ok {
			return answer{
				status:     http.StatusTooManyRequests,
				body:       map[string]any{"ok": false, "error": CodeRateLimited},
				retryAfter: retryAfterSeconds(wait),
			}
		}
	}
	body, e := spec.fn(s, req)
	if e != nil {
		return errorAnswer(e)
	}
	call.Applied = true
	return answer{status: http.StatusOK, body: body}
}

func (s *Server) authorizeLocked(token, scope string) *apiError {
	switch {
	case token == "":
		return errCode(CodeNotAuthed)
	case token != s.opts.Token:
		return errCode(CodeInvalidAuth)
	case s.revoked:
		return errCode(CodeTokenRevoked)
	case scope != "" && s.scopes != nil && !s.scopes[scope]:
		return s.missingScopeLocked(scope)
	}
	return nil
}

func (s *Server) missingScopeLocked(needed string) *apiError {
	var provided []string
	if s.scopes == nil {
		provided = []string{ScopeChannelsHistory, ScopeChatWrite, ScopeListsRead, ScopeListsWrite}
	} else {
		for sc := range s.scopes {
			provided = append(provided, sc)
		}
		slices.Sort(provided)
	}
	return &apiError{code: CodeMissingScope, extra: map[string]any{"needed": needed, "provided": strings.Join(provided, ",")}}
}

func (s *Server) faultAnswerLocked(f Fault, method string) answer {
	switch f.Kind {
	case FaultHTTPStatus:
		st := f.Status
		if st == 0 {
			st = http.StatusInternalServerError
		}
		return answer{status: st, html: true}
	case FaultRateLimited:
		return answer{
			status:     http.StatusTooManyRequests,
			body:       map[string]any{"ok": false, "error": CodeRateLimited},
			retryAfter: retryAfterSeconds(f.RetryAfter),
		}
	default:
		code := f.Code
		if code == "" {
			code = "fatal_error"
		}
		if code == CodeMissingScope {
			spec, _ := lookupMethod(method)
			return errorAnswer(s.missingScopeLocked(spec.scope))
		}
		return errorAnswer(errCode(code))
	}
}

// afterApply finishes a call whose write was applied under a
// TimeoutAfterApply or DropAfterApply fault.
func (s *Server) afterApply(w http.ResponseWriter, r *http.Request, f Fault, seq int) {
	if f.Kind == FaultDropAfterApply {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}

	s.mu.Lock()
	s.hung++
	s.notifyHungLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.hung--
		s.notifyHungLocked()
		s.mu.Unlock()
	}()

	var fire <-chan time.Time
	if f.Delay > 0 {
		c, stop := s.clock.Timer(f.Delay)
		defer stop()
		fire = c
	}
	select {
	case <-r.Context().Done():
	case <-s.done:
		panic(http.ErrAbortHandler) // drop the connection rather than answer 200 with no body
	case <-fire:
		s.mu.Lock()
		s.calls[seq-1].Status = http.StatusGatewayTimeout
		s.mu.Unlock()
		writeAnswer(w, answer{status: http.StatusGatewayTimeout, html: true})
	}
}

func (s *Server) notifyHungLocked() {
	close(s.hungChanged)
	s.hungChanged = make(chan struct{})
}

func (a answer) errorCode() string {
	if m, ok := a.body.(map[string]any); ok {
		if e, ok := m["error"].(string); ok {
			return e
		}
	}
	return ""
}

func errorAnswer(e *apiError) answer {
	body := map[string]any{"ok": false, "error": e.code}
	for k, v := range e.extra {
		body[k] = v
	}
	return answer{status: http.StatusOK, body: body}
}

func writeAnswer(w http.ResponseWriter, a answer) {
	if a.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(a.retryAfter))
	}
	if a.html {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(a.status)
		_, _ = fmt.Fprintf(w, "<html><body><h1>%d %s</h1></body></html>\n", a.status, http.StatusText(a.status))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(a.body)
}

// idBase and idStride make ids that look like Slack's ("Rec018B00063Z").
const (
	idBase   = 36*36*36*36*36*36*36*36 + 8*36*36*36*36*36*36*36 + 11*36*36*36*36*36*36
	idStride = 7919
)

// newIDLocked returns prefix followed by ten upper-case base-36 characters,
// increasing per prefix, so ids sort in creation order.
func (s *Server) newIDLocked(prefix string) string {
	s.ids[prefix]++
	n := strings.ToUpper(strconv.FormatInt(idBase+s.ids[prefix]*idStride, 36))
	return prefix + strings.Repeat("0", 10-len(n)) + n
}

// newTSLocked returns a message timestamp: the clock's time in microseconds,
// at least 100µs after the previous one, so timestamps are unique and increasing.
func (s *Server) newTSLocked() string {
	now := s.clock.Now().UnixMicro()
	next := max(now, s.lastTS) + 100
	s.lastTS = next
	return formatTS(next)
}

func formatTS(micros int64) string {
	return fmt.Sprintf("%d.%06d", micros/1_000_000, micros%1_000_000)
}

// parseTS reads "1700000000.000100" (or "1700000000") as microseconds.
func parseTS(ts string) (int64, bool) {
	secs, frac, _ := strings.Cut(ts, ".")
	sec, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || sec < 0 {
		return 0, false
	}
	if len(frac) > 6 {
		frac = frac[:6]
	}
	var us int64
	if frac != "" {
		frac += strings.Repeat("0", 6-len(frac))
		if us, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return 0, false
		}
	}
	return sec*1_000_000 + us, true
}

func (s *Server) authTest(_ *request) (any, *apiError) {
	return map[string]any{
		"ok":      true,
		"url":     "https://casebook-fake.slack.com/",
		"team":    s.opts.TeamName,
		"user":    "casebook",
		"team_id": s.opts.TeamID,
		"user_id": s.opts.BotUserID,
		"bot_id":  s.opts.BotID,
	}, nil
}
