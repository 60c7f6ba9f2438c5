// Package apptest holds what tests of the wired application share: a settable clock, the storage
// backends to run against, and fixtures that act through the command layer.
package apptest

import (
	"context"
	"database/sql"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// Clock is a settable clock for app.Config.Now. It is also a fakeslack.Clock, so a fake Slack can
// stamp messages on the application's time (lookups by time window need both on one clock).
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	timers []clockTimer
}

type clockTimer struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock forward by d and fires the timers that are due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.t) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- c.t
	}
	c.timers = kept
}

// Timer returns a channel that receives once Advance has moved the clock d on.
func (c *Clock) Timer(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.t
		return ch, func() {}
	}
	c.timers = append(c.timers, clockTimer{at: c.t.Add(d), ch: ch})
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, tm := range c.timers {
			if tm.ch == ch {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return
			}
		}
	}
}

// Backend opens the application on one storage mode.
type Backend struct {
	Name   string
	Config func(t *testing.T) app.Config
}

// Backends are a fresh embedded SQLite file and, when TEST_DATABASE_URL is set, a fresh Postgres
// schema (skipped, saying so, otherwise).
var Backends = []Backend{
	{"sqlite", func(t *testing.T) app.Config { return app.Config{DataDir: filepath.Join(t.TempDir(), "data")} }},
	{"postgres", func(t *testing.T) app.Config { return app.Config{DatabaseURL: pgtest.URL(t)} }},
}

// Intake records a public-form inquiry with personal data in every personal field.
func Intake(t testing.TB, a *app.App, tenant domain.TenantID, key string) domain.InquiryID {
	t.Helper()
	res, err := a.Commands.Intake(t.Context(), commands.Intake{Tenant: tenant, Source: domain.SourcePublicForm, IdempotencyKey: key,
		Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"}, Subject: "Invoice twice",
		Message: "Invoice 42 charges me twice.", Category: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	return res.InquiryID
}

// Transition moves an inquiry as actor, with a reason for the edges that need one.
func Transition(t testing.TB, a *app.App, actor domain.Principal, id domain.InquiryID, to domain.Status, priority domain.Priority) {
	t.Helper()
	_, err := a.Commands.Transition(t.Context(), commands.Transition{Target: commands.Target{Tenant: actor.TenantID, InquiryID: id, Actor: actor},
		To: to, Priority: priority, Reason: "because"})
	if err != nil {
		t.Fatal(err)
	}
}

// Open opens the application with cfg; it is closed when t ends. Slack updates are not debounced
// unless cfg sets SlackTiming.Quiet: tests hold the clock still, so an inquiry would never be quiet.
func Open(t testing.TB, cfg app.Config) *app.App {
	t.Helper()
	if cfg.SlackTiming.Quiet == 0 {
		cfg.SlackTiming.Quiet = -1
	}
	a, err := app.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// InstallSlack installs fake as tenant's Slack workspace and, when channel is not empty, makes
// channel the tenant's thread destination, cleared for personal data.
func InstallSlack(t testing.TB, a *app.App, tenant domain.TenantID, fake *fakeslack.Server, channel string) {
	t.Helper()
	if _, err := a.Slack.Install(t.Context(), slackinstall.InstallRequest{Tenant: tenant, Token: fake.Token(), SigningSecret: "sig",
		AppID: "A0FAKEAPP01", APIURL: fake.URL()}); err != nil {
		t.Fatal(err)
	}
	if channel == "" {
		return
	}
	if _, err := a.Slack.SetDestination(t.Context(), slackinstall.DestinationRequest{Tenant: tenant, Channel: channel, Clearance: "personal"}); err != nil {
		t.Fatal(err)
	}
}

// Serve serves a (subscribers, jobs and the HTTP API) on a fresh loopback port and returns the
// API's base URL ("http://127.0.0.1:…") and a stop function, which shuts the server down and
// fails t if serving failed. Call stop before a is closed.
func Serve(t testing.TB, a *app.App) (base string, stop func()) {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, ln) }()
	var once sync.Once
	return "http://" + ln.Addr().String(), func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Error(err)
			}
		})
	}
}

// CatchUp runs every subscriber of a until it has applied the whole log (30 s at most).
func CatchUp(t testing.TB, a *app.App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := a.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
}

// SubscriberRoundTrips runs a's subscriber name alone until it has applied the log's head as it
// stands now and returns the statements the runner sent meanwhile, by round trip
// (sqldb.StatementLog: on Postgres every statement, River's included; on SQLite those run through
// sqldb's handles only).
func SubscriberRoundTrips(t testing.TB, a *app.App, name string) [][]string {
	t.Helper()
	var r *projections.Runner
	for _, c := range a.Runners {
		if c.Projection.Name() == name {
			r = c
		}
	}
	if r == nil {
		t.Fatalf("no subscriber %s", name)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	head, err := a.Store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	runCtx, log := sqldb.WithStatementLog(runCtx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(runCtx) }()
	err = r.WaitFor(ctx, head)
	stop()
	<-done
	if err != nil {
		t.Fatalf("subscriber %s did not reach the head: %v", name, err)
	}
	return log.RoundTrips()
}

// SubscriberBatch runs a's subscriber name as SubscriberRoundTrips does and returns the round trips
// of the last batch it applied (the one with the newest events), from its BEGIN to its COMMIT
// (SQLite logs neither: there, from its bookkeeping to its checkpoint). A runner may apply the
// events in more than one batch: its first read may be another subscriber's, shared.
func SubscriberBatch(t testing.TB, a *app.App, name string) [][]string {
	t.Helper()
	trips := SubscriberRoundTrips(t, a, name)
	var last [][]string
	for i, trip := range trips {
		first := trip[0]
		if strings.EqualFold(first, "begin") && len(trip) > 1 { // Postgres sends it with the batch's first statement
			first = trip[1]
		}
		if !strings.Contains(first, "projection_batch_begin") && !strings.Contains(first, "json_group_array(stream) FROM projection_parked") {
			continue
		}
		start, end := i, len(trips)
		begun := first != trip[0]
		if i > 0 && strings.EqualFold(trips[i-1][0], "begin") && len(trips[i-1]) == 1 {
			start, begun = i-1, true
		}
		for j := i + 1; j < len(trips); j++ {
			q := trips[j][len(trips[j])-1]
			if strings.EqualFold(q, "commit") || strings.HasPrefix(q, "INSERT INTO projection_checkpoints") && !begun {
				end = j + 1
				break
			}
		}
		last = trips[start:end]
	}
	if last == nil {
		t.Fatalf("%s applied no batch:\n%v", name, trips)
	}
	return last
}

// CountStatements counts the statements of round trips.
func CountStatements(trips [][]string) int {
	n := 0
	for _, trip := range trips {
		n += len(trip)
	}
	return n
}

// HeldFor counts a batch's round trips from the one with its first write (a statement with
// INSERT, UPDATE or DELETE in it, row locks included) to its last, both included (0 when it
// wrote nothing): on Postgres the batch holds a transaction id, and with it the log's visible end
// for every reader, for that many round trips.
func HeldFor(trips [][]string) int {
	for i, trip := range trips {
		for _, q := range trip {
			if writes.MatchString(q) {
				return len(trips) - i
			}
		}
	}
	return 0
}

var writes = regexp.MustCompile(`(?i)\b(INSERT|UPDATE|DELETE)\b`)

// WaitReady waits (30 s at most) until every subscriber of a running a has applied the log's head
// as it stands now and a.Ready reports ready, as /readyz would. It fails t with the last reason.
func WaitReady(t testing.TB, a *app.App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := a.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	probe := time.NewTicker(10 * time.Millisecond)
	defer probe.Stop()
	for {
		err := a.Ready()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not ready: %v", err)
		case <-probe.C:
		}
	}
}

// Jobs lists the River jobs of a kind in insertion order.
func Jobs(t testing.TB, c *river.Client[*sql.Tx], kind string) []*rivertype.JobRow {
	t.Helper()
	res, err := c.JobList(t.Context(), river.NewJobListParams().Kinds(kind).OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	return res.Jobs
}

// BoardColumns is a Slack List fit for an internal-clearance List projection (package lists'
// columns, plus a column Casebook does not write).
func BoardColumns() []fakeslack.Column {
	st := []string{}
	for _, s := range domain.Statuses {
		st = append(st, string(s))
	}
	return []fakeslack.Column{
		{Key: lists.ColReceipt, Name: "Receipt", Type: "text", Primary: true},
		{Key: lists.ColMarker, Name: "Casebook marker", Type: "text"},
		{Key: lists.ColStatus, Name: "Status", Type: "select", Choices: st},
		{Key: lists.ColPriority, Name: "Priority", Type: "select", Choices: []string{"low", "normal", "high", "urgent"}},
		{Key: lists.ColTeam, Name: "Team", Type: "text"},
		{Key: "notes", Name: "Notes", Type: "text"},
	}
}

// LogLen counts the events in a's whole log (for "nothing was appended" checks).
func LogLen(t testing.TB, a *app.App) int {
	t.Helper()
	evs, err := a.Store.ReadAll(t.Context(), eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// EachBackend runs fn on every backend (Backends) in parallel subtests, each with its fresh config.
func EachBackend(t *testing.T, fn func(t *testing.T, cfg app.Config)) {
	t.Helper()
	for _, be := range Backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, be.Config(t))
		})
	}
}

// TenantWithOperator creates tenant slug and its operator Olga of team support; it returns the
// tenant, its admin and the operator.
func TenantWithOperator(t testing.TB, a *app.App, slug string) (domain.TenantID, domain.Principal, domain.Principal) {
	t.Helper()
	ten, admin, _, err := a.Tenancy.CreateTenant(t.Context(), slug)
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := a.Tenancy.CreatePrincipal(t.Context(), slug, "Olga", domain.RoleOperator, "support")
	if err != nil {
		t.Fatal(err)
	}
	return ten.ID, admin, op
}
