package callbacks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/queries"
)

// History reads the latest entry of an inquiry's timeline, tenant-scoped (*queries.Reader).
type History interface {
	LastTimelineEntry(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (queries.TimelineEntry, error)
}

// Store is what the handler needs of the installation registry (*slackinstall.Store).
type Store interface {
	SigningSecrets(ctx context.Context) ([]slackinstall.Signing, error)
	InstallationByKey(ctx context.Context, key string) (slackinstall.Installation, string, error)
	LinkedPrincipal(ctx context.Context, tenant domain.TenantID, key, slackUser string) (domain.PrincipalID, error)
	RecordDisabled(ctx context.Context, tenant domain.TenantID, key, reason, eventID string) error
	// Client is a Web API client with the installation's bot token (for views.open).
	Client(in slackinstall.Installation) *slack.Client
}

var _ Store = (*slackinstall.Store)(nil)

// Threads finds the inquiry of a stored root message (*threads.Worker, wired by the app: the
// callbacks package never imports the threads package).
type Threads interface {
	ThreadByRoot(ctx context.Context, tenant domain.TenantID, key, channel, ts string) (domain.InquiryID, error)
}

// Defaults.
const (
	DefaultMaxBody           = 256 << 10
	DefaultWorkers           = 4
	DefaultQueue             = 64
	DefaultAckBudget         = 2 * time.Second
	DefaultResponseURLPrefix = "https://hooks.slack.com/"
	commandTimeout           = 30 * time.Second
)

// Handler serves POST /slack/interactions and POST /slack/events. It answers within AckBudget
// (well inside Slack's 3 s): commands run on a bounded pool of Workers, and their results reach
// the user through response_url (block actions) or the modal's answer when they finish in time
// (view submissions); the thread itself is updated by the projection. An ack only says the
// delivery was accepted, not that the command succeeded.
type Handler struct {
	Store   Store
	Threads Threads
	// Guard stops every effect kind of an uninstalled installation.
	Guard      *slackeffects.Guard
	Principals commands.Principals
	Commands   commands.Executor
	// Audit records the refusals that happen before the command layer (unknown installation,
	// unlinked user, disabled principal, unknown thread, another workspace) beside the commands'
	// own entries; nil records nothing.
	Audit commands.AuditSink
	// Load reads an inquiry to explain a refusal ("now resolved"); nil omits the detail.
	Load func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*domain.Inquiry, error)
	// History names who changed an inquiry last ("changed by Bob"); nil omits the name.
	History History
	Seen    *Seen
	Now     func() time.Time
	Logger  *slog.Logger
	// HTTPClient posts to response_url; nil uses one with a 10 s timeout.
	HTTPClient *http.Client
	// ResponseURLPrefix is the only prefix a response_url may have (DefaultResponseURLPrefix).
	ResponseURLPrefix string
	MaxBody           int64
	Workers           int
	Queue             int
	AckBudget         time.Duration

	// Refresh queues a re-render of an inquiry's thread at version (the thread effect, keyed by
	// tenant, inquiry and version, so asking twice is one job); nil queues nothing.
	Refresh func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, version uint64) error

	// Policy reads the tenant's SLA policy, whose time zone "tomorrow 9:00" in the Remind me modal
	// is in (none, or nil: UTC).
	Policy func(ctx context.Context, tenant domain.TenantID) (*domain.SLAPolicy, error)

	once   sync.Once
	mu     sync.Mutex
	jobs   chan func()
	closed bool
	wg     sync.WaitGroup
}

func (h *Handler) start() {
	h.once.Do(func() {
		if h.Workers <= 0 {
			h.Workers = DefaultWorkers
		}
		if h.Queue <= 0 {
			h.Queue = DefaultQueue
		}
		h.jobs = make(chan func(), h.Queue)
		for range h.Workers {
			h.wg.Go(func() {
				for job := range h.jobs {
					job()
				}
			})
		}
	})
}

// submit queues job; false when the queue is full or the handler is closed.
func (h *Handler) submit(job func()) bool {
	h.start()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	select {
	case h.jobs <- job:
		return true
	default:
		return false
	}
}

// Close stops accepting work and waits for queued commands and replies to finish.
func (h *Handler) Close() error {
	h.start()
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.jobs)
	}
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handler) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// refuse logs a refused callback with the request id and a reason code only: no user, channel,
// workspace or message content.
func (h *Handler) refuse(ctx context.Context, reqID, kind, reason string) {
	h.log().WarnContext(ctx, "slack callback refused", "request_id", reqID, "kind", kind, "reason", reason)
}

// Reason codes of the refusals audited before the command layer.
const (
	RefusedUnknownInstallation = "unknown_installation"
	RefusedAnotherWorkspace    = "another_workspace" // signed by another installation's secret
	RefusedUnlinkedUser        = "unlinked_user"
	RefusedPrincipalDisabled   = "principal_disabled"
	RefusedUnknownThread       = "unknown_thread"   // a root Casebook did not post in this installation
	RefusedStale               = "version_mismatch" // a click on a message rendered at an older version
)

// versionChecked are the elements refused when clicked on a message older than the inquiry: those
// that change (or open a form to change) its state or owner, as the HTTP API refuses a stale
// If-Match; and the assign and cancel forms, which carry the version of the message they were
// opened from, so a change made while the form was open is not overwritten. "Add note" and
// "Remind me" add to the inquiry whatever its state and stay usable on an older message. Elements
// (and forms) without a version, rendered before versions were carried, are taken as before.
var versionChecked = map[string]bool{ActionClaim: true, ActionResolve: true, ActionAssignMe: true, ActionStatus: true,
	ActionAssign: true, ActionCancel: true, ModalAssign: true, ModalCancel: true}

// stale reports whether the inquiry has moved past the version a clicked message was rendered at;
// if so it queues the message's re-render at the current version. Without Load nothing is stale.
func (h *Handler) stale(ctx context.Context, reqID string, tenant domain.TenantID, id domain.InquiryID, version uint64) bool {
	if h.Load == nil {
		return false
	}
	q, err := h.Load(ctx, tenant, id)
	if err != nil || !q.Exists() || q.Version <= version {
		return false // a load error leaves the decision to the command, which reads the stream itself
	}
	if h.Refresh != nil {
		if err := h.Refresh(context.WithoutCancel(ctx), tenant, id, q.Version); err != nil {
			h.log().ErrorContext(ctx, "slack refresh not queued", "request_id", reqID, "err", err)
		}
	}
	return true
}

// refuseAudited logs a refusal like refuse and records it in the command audit as command
// "slack_{kind}", outcome refused, code reason: tenant is "" when no installation matched; actor
// is the principal when known, else "slack:{user id}" (an id; never a name, email or message).
func (h *Handler) refuseAudited(ctx context.Context, reqID, kind, reason string, tenant domain.TenantID, actor domain.PrincipalID, id domain.InquiryID) {
	h.refuse(ctx, reqID, kind, reason)
	if h.Audit == nil {
		return
	}
	e := commands.AuditEntry{RequestID: reqID, Tenant: tenant, Actor: actor, Command: "slack_" + kind, InquiryID: id,
		Outcome: commands.OutcomeRefused, Code: reason, At: h.now().UTC()}
	if err := h.Audit.Record(context.WithoutCancel(ctx), e); err != nil {
		h.log().ErrorContext(ctx, "audit write failed", "request_id", reqID, "command", e.Command, "err", err)
	}
}

// slackActor names an unresolved Slack user in the audit.
func slackActor(user string) domain.PrincipalID {
	if user == "" {
		return "slack:unknown"
	}
	return domain.PrincipalID("slack:" + user)
}

func requestID(w http.ResponseWriter) string {
	if id := w.Header().Get("X-Request-Id"); id != "" {
		return id
	}
	return "slack"
}

// readVerified reads the exact body (bounded) and verifies it against every active
// installation's signing secret before anything in it is looked at.
func (h *Handler) readVerified(w http.ResponseWriter, r *http.Request, kind string) ([]byte, bool) {
	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "could not read body", http.StatusBadRequest)
		return nil, false
	}
	sigs, err := h.Store.SigningSecrets(r.Context())
	if err != nil {
		h.log().ErrorContext(r.Context(), "slack signing secrets", "request_id", requestID(w), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return nil, false
	}
	secrets := make([]string, len(sigs))
	for i, s := range sigs {
		secrets[i] = s.Secret
	}
	if _, err := Verify(r.Header, body, h.now(), secrets); err != nil {
		reason := "bad_signature"
		if errors.Is(err, ErrStale) {
			reason = "stale_timestamp"
		}
		h.refuse(r.Context(), requestID(w), kind, reason)
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

// bind finds the installation the verified payload names and checks that its own signing secret
// signed the body, so one app's secret cannot speak for another installation. user is the Slack
// user the payload names ("" for events), for the audit.
func (h *Handler) bind(w http.ResponseWriter, r *http.Request, body []byte, key, kind, user string) (slackinstall.Installation, bool) {
	in, secret, err := h.Store.InstallationByKey(r.Context(), key)
	if errors.Is(err, domain.ErrNotFound) {
		h.refuseAudited(r.Context(), requestID(w), kind, RefusedUnknownInstallation, "", slackActor(user), "")
		w.WriteHeader(http.StatusOK) // nothing to retry
		return in, false
	}
	if err != nil {
		h.log().ErrorContext(r.Context(), "slack installation lookup", "request_id", requestID(w), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return in, false
	}
	if _, err := Verify(r.Header, body, h.now(), []string{secret}); err != nil {
		h.refuseAudited(r.Context(), requestID(w), kind, RefusedAnotherWorkspace, in.Tenant, slackActor(user), "")
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return in, false
	}
	return in, true
}

// Events serves the Events API: url_verification, and app_uninstalled / tokens_revoked, which
// disable the installation. Deliveries are deduplicated by event id.
func (h *Handler) Events(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readVerified(w, r, "event")
	if !ok {
		return
	}
	ev, err := ParseEvent(body)
	if err != nil {
		h.refuse(r.Context(), requestID(w), "event", "malformed")
		http.Error(w, "malformed payload", http.StatusBadRequest)
		return
	}
	if ev.Type == "url_verification" {
		writeJSON(w, map[string]string{"challenge": ev.Challenge})
		return
	}
	in, ok := h.bind(w, r, body, ev.InstallKey(), "event", "")
	if !ok {
		return
	}
	ctx := r.Context()
	key := in.Key + "/" + ev.EventID
	fresh, err := h.Seen.Claim(ctx, key)
	if err != nil {
		h.log().ErrorContext(ctx, "slack event dedupe", "request_id", requestID(w), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if !fresh {
		h.log().InfoContext(ctx, "slack event duplicate", "request_id", requestID(w), "retry_num", r.Header.Get("X-Slack-Retry-Num"))
		w.WriteHeader(http.StatusOK)
		return
	}
	if ev.EventType == "app_uninstalled" || (ev.EventType == "tokens_revoked" && ev.BotTokensRevoked) {
		err := h.Guard.DisableInstallation(ctx, in.Tenant, in.Key, ev.EventType)
		if err == nil {
			err = h.Store.RecordDisabled(ctx, in.Tenant, in.Key, ev.EventType, ev.EventID)
		}
		if err != nil {
			_ = h.Seen.Release(context.WithoutCancel(ctx), key)
			h.log().ErrorContext(ctx, "slack disable installation", "request_id", requestID(w), "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		h.log().WarnContext(ctx, "slack installation disabled", "request_id", requestID(w), "tenant", string(in.Tenant), "reason", ev.EventType)
	}
	w.WriteHeader(http.StatusOK)
}

// Interactions serves block_actions and view_submission payloads.
func (h *Handler) Interactions(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readVerified(w, r, "interaction")
	if !ok {
		return
	}
	it, err := ParseInteraction(body)
	if err != nil {
		h.refuse(r.Context(), requestID(w), "interaction", "malformed")
		http.Error(w, "malformed payload", http.StatusBadRequest)
		return
	}
	kind := "interaction"
	if it.Type == "message_action" {
		kind = "shortcut"
	}
	in, ok := h.bind(w, r, body, it.InstallKey(), kind, it.UserID)
	if !ok {
		return
	}
	if it.Type == "message_action" {
		h.shortcut(w, r, in, it)
		return
	}
	ctx, reqID := r.Context(), requestID(w)
	actor, err := h.actor(ctx, reqID, "interaction", in, it.UserID)
	if err != nil {
		h.answer(w, r, it, "", h.explain(ctx, in.Tenant, "", err))
		return
	}
	id, err := h.Threads.ThreadByRoot(ctx, in.Tenant, in.Key, it.Channel, it.RootTS)
	if err != nil {
		if errors.Is(err, domain.ErrNotFound) {
			h.refuseAudited(ctx, reqID, "interaction", RefusedUnknownThread, in.Tenant, actor.ID, "")
		}
		h.answer(w, r, it, "", h.explain(ctx, in.Tenant, "", err))
		return
	}
	if it.Version > 0 && versionChecked[it.ActionID] && h.stale(ctx, reqID, in.Tenant, id, it.Version) {
		h.refuseAudited(ctx, reqID, "interaction", RefusedStale, in.Tenant, actor.ID, id)
		h.answer(w, r, it, "", h.explain(ctx, in.Tenant, id, domain.ErrConcurrency))
		return
	}
	if it.Type == "block_actions" {
		switch it.ActionID {
		case ActionAssign, ActionNote, ActionCancel, ActionRemind:
			h.openModal(w, r, in, it)
			return
		}
	}
	cmd, field, err := h.command(ctx, in, it)
	if err != nil {
		h.answer(w, r, it, field, h.explain(ctx, in.Tenant, id, err))
		return
	}
	t := commands.Target{Tenant: in.Tenant, InquiryID: id, Actor: actor, IdempotencyKey: idempotencyKey(in.Key, it), CorrelationID: reqID}
	done := make(chan outcome, 1)
	run := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
		defer cancel()
		text, err := cmd(cctx, t)
		if err != nil {
			text = h.explain(cctx, in.Tenant, id, err)
		}
		done <- outcome{text, err == nil}
		if it.Type == "block_actions" {
			h.respond(cctx, reqID, it.ResponseURL, text)
		}
	}
	if !h.submit(run) {
		h.refuse(ctx, reqID, "interaction", "busy")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	if it.Type == "block_actions" {
		w.WriteHeader(http.StatusOK) // the result goes to response_url
		return
	}
	budget := h.AckBudget
	if budget <= 0 {
		budget = DefaultAckBudget
	}
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case o := <-done:
		if o.ok {
			w.WriteHeader(http.StatusOK) // closes the modal; the thread shows the change
			return
		}
		h.answer(w, r, it, field, o.text)
	case <-timer.C:
		w.WriteHeader(http.StatusOK) // still running: the thread shows it when it lands
	}
}

// actor resolves a Slack user of the installation to an enabled principal of its tenant, read
// afresh on every request. An unlinked user (or one whose principal is gone) and a disabled
// principal are refused here, before any command, and the refusal audited.
func (h *Handler) actor(ctx context.Context, reqID, kind string, in slackinstall.Installation, slackUser string) (domain.Principal, error) {
	pid, err := h.Store.LinkedPrincipal(ctx, in.Tenant, in.Key, slackUser)
	if errors.Is(err, domain.ErrNotFound) {
		h.refuseAudited(ctx, reqID, kind, RefusedUnlinkedUser, in.Tenant, slackActor(slackUser), "")
		return domain.Principal{}, fmt.Errorf("slack user not linked: %w", domain.ErrUnauthenticated)
	}
	if err != nil {
		return domain.Principal{}, err
	}
	p, err := h.Principals.Principal(ctx, in.Tenant, pid)
	if errors.Is(err, domain.ErrNotFound) {
		h.refuseAudited(ctx, reqID, kind, RefusedUnlinkedUser, in.Tenant, slackActor(slackUser), "")
		return domain.Principal{}, fmt.Errorf("slack user's principal is gone: %w", domain.ErrUnauthenticated)
	}
	if err == nil && p.Disabled {
		h.refuseAudited(ctx, reqID, kind, RefusedPrincipalDisabled, in.Tenant, p.ID, "")
		return domain.Principal{}, fmt.Errorf("slack user's principal: %w", domain.ErrPrincipalDisabled)
	}
	return p, err
}

type outcome struct {
	text string
	ok   bool
}

type runFunc func(ctx context.Context, t commands.Target) (string, error)

// command maps an interaction to a command; field names the modal input a refusal belongs to.
func (h *Handler) command(ctx context.Context, in slackinstall.Installation, it Interaction) (runFunc, string, error) {
	c := h.Commands
	switch it.ActionID {
	case ActionClaim:
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.Claim(ctx, commands.Claim{Target: t})
			return "You claimed this inquiry.", err
		}, "", nil
	case ActionResolve:
		return transition(c, domain.StatusResolved), "", nil
	case ActionStatus:
		to, err := domain.ParseStatus("status", it.Value)
		if err != nil {
			return nil, "", err
		}
		return transition(c, to), "", nil
	case ActionAssignMe:
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.Assign(ctx, commands.Assign{Target: t, Owner: t.Actor.ID})
			return "Assigned to you.", err
		}, "", nil
	case ModalAssign:
		owner, err := h.Store.LinkedPrincipal(ctx, in.Tenant, in.Key, it.Inputs[InputOwner])
		if err != nil {
			return nil, InputOwner, domain.Invalid("owner", "that Slack user is not linked to Casebook")
		}
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.Assign(ctx, commands.Assign{Target: t, Owner: owner})
			return "Assigned.", err
		}, InputOwner, nil
	case ModalNote:
		body := it.Inputs[InputNote]
		if utf8.RuneCountInString(body) > slackinstall.MaxPlainTextInput {
			return nil, InputNote, domain.Invalid("note", "a note from Slack is at most %d characters; add a longer one in the console", slackinstall.MaxPlainTextInput)
		}
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.AddNote(ctx, commands.AddNote{Target: t, Body: body})
			return "Note added.", err
		}, InputNote, nil
	case ModalRemind:
		return h.remind(ctx, in, it)
	case ModalCancel:
		reason := it.Inputs[InputReason]
		return func(ctx context.Context, t commands.Target) (string, error) {
			_, err := c.Cancel(ctx, commands.Cancel{Target: t, Reason: reason})
			return "Cancelled.", err
		}, InputReason, nil
	}
	return nil, "", domain.Invalid("action", "unknown action")
}

func transition(c commands.Executor, to domain.Status) runFunc {
	return func(ctx context.Context, t commands.Target) (string, error) {
		_, err := c.Transition(ctx, commands.Transition{Target: t, To: to})
		return "Moved to " + string(to) + ".", err
	}
}

// idempotencyKey derives a command's key from the delivery: installation, the action's own
// timestamp (or the modal's view id) and action id, so a repeated delivery is one command.
func idempotencyKey(installKey string, it Interaction) string {
	once := it.ActionTS
	if it.Type == "view_submission" {
		once = it.ViewID
	}
	if once == "" {
		once = it.TriggerID
	}
	sum := sha256.Sum256([]byte(installKey + "\x00" + it.Type + "\x00" + once + "\x00" + it.ActionID + "\x00" + it.Value))
	return "slack:" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20])
}

// explain turns a refusal into what the Slack user sees; internal errors are logged, not shown.
func (h *Handler) explain(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, err error) string {
	var claimed *domain.ClaimedError
	var ve *domain.ValidationError
	var rl *domain.RateLimitError
	switch {
	case errors.As(err, &claimed):
		return "Already claimed by " + h.name(ctx, tenant, claimed.Owner) + "."
	case errors.Is(err, domain.ErrErased):
		return "This inquiry was erased; nothing was done."
	case errors.Is(err, domain.ErrArchived):
		return "This inquiry is archived; nothing was done. Unarchive it in Casebook to work on it."
	case errors.Is(err, domain.ErrConcurrency), errors.Is(err, domain.ErrInvalidTransition):
		return "This inquiry was changed" + h.current(ctx, tenant, id) + " — refresh and try again."
	case errors.Is(err, domain.ErrUnauthenticated):
		return "Your Slack account is not linked to Casebook. Ask an admin to run `casebook slack link-user`."
	case errors.Is(err, domain.ErrPrincipalDisabled):
		return "Your Casebook account is disabled; nothing was done. Ask an admin of your Casebook tenant."
	case errors.Is(err, domain.ErrNotFound):
		return "This inquiry is not available here."
	case errors.Is(err, domain.ErrForbidden):
		return "Your role or team does not allow this."
	case errors.Is(err, domain.ErrIdempotencyMismatch):
		return "This action was already used for something else; refresh and try again."
	case errors.As(err, &ve):
		return "Not done: " + ve.Error() + "."
	case errors.As(err, &rl):
		return "Not done: " + rl.Error() + "."
	}
	h.log().ErrorContext(ctx, "slack command failed", "tenant", string(tenant), "inquiry", string(id), "err", err)
	return "Something went wrong; try again."
}

func (h *Handler) name(ctx context.Context, tenant domain.TenantID, id domain.PrincipalID) string {
	if p, err := h.Principals.Principal(ctx, tenant, id); err == nil && p.Name != "" {
		return p.Name
	}
	return "someone else"
}

// current explains a stale click: " by {last actor} (now {status}, owned by {owner})". The actor
// is named only when the query model has caught up with the aggregate (else it might not be the
// one who changed it) and is a principal of the tenant: never the requester or a system source.
func (h *Handler) current(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) string {
	if id == "" {
		return ""
	}
	var s string
	var version uint64
	if h.Load != nil {
		if q, err := h.Load(ctx, tenant, id); err == nil && q.Exists() {
			version = q.Version
			s = " (now " + string(q.Status)
			if q.Owner != "" {
				s += ", owned by " + h.name(ctx, tenant, q.Owner)
			}
			s += ")"
		}
	}
	if by := h.lastActor(ctx, tenant, id, version); by != "" {
		s = " by " + by + s
	}
	return s
}

// lastActor is the display name of the principal behind the timeline's last entry, if that entry
// is at version (when known) and its actor is a principal of tenant; else "".
func (h *Handler) lastActor(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, version uint64) string {
	if h.History == nil {
		return ""
	}
	last, err := h.History.LastTimelineEntry(ctx, tenant, id)
	if err != nil {
		return ""
	}
	if (version != 0 && last.Version != version) || last.Actor == "" {
		return ""
	}
	p, err := h.Principals.Principal(ctx, tenant, last.Actor)
	if err != nil || p.TenantID != tenant {
		return ""
	}
	return p.Name
}

// answer tells the user why nothing happened: in the modal (view_submission) or through
// response_url (block_actions).
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, it Interaction, field, text string) {
	if it.Type == "view_submission" {
		if field == "" {
			field = map[string]string{ModalAssign: InputOwner, ModalNote: InputNote, ModalCancel: InputReason, ModalRemind: InputWhen}[it.ActionID]
		}
		writeJSON(w, map[string]any{"response_action": "errors", "errors": map[string]string{field: text}})
		return
	}
	reqID := requestID(w)
	url := it.ResponseURL
	if !h.submit(func() { h.respond(context.WithoutCancel(r.Context()), reqID, url, text) }) {
		h.refuse(r.Context(), reqID, "interaction", "busy")
	}
	w.WriteHeader(http.StatusOK)
}

// respond posts an ephemeral message to response_url, which must carry ResponseURLPrefix.
func (h *Handler) respond(ctx context.Context, reqID, url, text string) {
	prefix := h.ResponseURLPrefix
	if prefix == "" {
		prefix = DefaultResponseURLPrefix
	}
	if url == "" || !strings.HasPrefix(url, prefix) {
		h.refuse(ctx, reqID, "interaction", "response_url_not_allowed")
		return
	}
	b, _ := json.Marshal(map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	client := h.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	res, err := client.Do(req)
	if err != nil {
		h.log().WarnContext(ctx, "slack response_url failed", "request_id", reqID, "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
	_ = res.Body.Close()
}

// openModal opens the modal of an assign, note or cancel button on the pool (the trigger id is
// valid for 3 s); the modal carries the root message's channel and ts.
func (h *Handler) openModal(w http.ResponseWriter, r *http.Request, in slackinstall.Installation, it Interaction) {
	reqID := requestID(w)
	ctx := context.WithoutCancel(r.Context())
	if !h.submit(func() {
		v := Modal(it.ActionID, it.Channel, it.RootTS)
		if versionChecked[v.CallbackID] && it.Version > 0 {
			v.PrivateMetadata += " v" + strconv.FormatUint(it.Version, 10)
		}
		if it.ActionID == ActionRemind {
			v = RemindModal(it.Channel, it.RootTS, h.zone(ctx, in.Tenant))
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := h.Store.Client(in).OpenViewContext(cctx, it.TriggerID, v); err != nil {
			h.log().WarnContext(ctx, "slack views.open failed", "request_id", reqID, "err", err)
			h.respond(ctx, reqID, it.ResponseURL, "Could not open the form; try again.")
		}
	}) {
		h.refuse(r.Context(), reqID, "interaction", "busy")
	}
	w.WriteHeader(http.StatusOK)
}

// Modal builds the modal an action opens.
func Modal(action, channel, rootTS string) slack.ModalViewRequest {
	txt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	var callback, title, label, input string
	// Slack allows max_length 1–3000 (slackinstall.MaxPlainTextInput): a longer domain limit is
	// declared as Slack's, and a longer submission is refused by the handler (noteTooLong).
	var el slack.BlockElement
	switch action {
	case ActionAssign:
		callback, title, label, input = ModalAssign, "Assign", "Owner", InputOwner
		el = slack.NewOptionsSelectBlockElement(slack.OptTypeUser, txt("Choose someone"), InputOwner)
	case ActionNote:
		callback, title, label, input = ModalNote, "Add note", "Note", InputNote
		e := slack.NewPlainTextInputBlockElement(txt("Internal note"), InputNote)
		e.Multiline, e.MaxLength = true, min(domain.MaxNoteLen, slackinstall.MaxPlainTextInput)
		el = e
	default:
		callback, title, label, input = ModalCancel, "Cancel inquiry", "Reason", InputReason
		e := slack.NewPlainTextInputBlockElement(txt("Why is it cancelled?"), InputReason)
		e.MaxLength = min(domain.MaxReasonLen, slackinstall.MaxPlainTextInput)
		el = e
	}
	return slack.ModalViewRequest{
		Type: slack.VTModal, Title: txt(slackinstall.Fit(title, slackinstall.MaxModalTitle)), Submit: txt("Save"), Close: txt("Close"),
		CallbackID: callback, PrivateMetadata: channel + " " + rootTS,
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock(input, txt(label), nil, el)}},
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}
