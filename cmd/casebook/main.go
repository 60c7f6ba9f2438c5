// Command casebook is Casebook's one binary: serve, migrate, tenants, principals, tokens and bench.
//
// Every subcommand takes the same storage flags as serve, with CASEBOOK_* environment defaults:
//
//	--data-dir        CASEBOOK_DATA_DIR        (default ./casebook-data)  embedded SQLite storage
//	--database-url    CASEBOOK_DATABASE_URL    Postgres for everything (or the query side)
//	--eventstore-url  CASEBOOK_EVENTSTORE_URL  KurrentDB/EventStoreDB for events
//	--master-key-file CASEBOOK_MASTER_KEY_FILE the master key wrapping inquiry data keys
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
)

func main() { os.Exit(mainCode()) }

func mainCode() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
}

// exitCode is 0 on success and for -h/--help; 2 for a command line that cannot be run as written
// (usageError, errUsage); 1 for a command that failed. The error is said once, on stderr.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	if !errors.Is(err, errReported) {
		fmt.Fprintln(stderr, "casebook:", err)
	}
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

const usage = `usage: casebook <command> [flags]

commands:
  serve                                      run the HTTP API and the subscribers
  migrate                                    create or upgrade the storage schema, then exit
  tenants create --slug S [--name N] [--ttl D]  create a tenant; prints its admin token once
  tenants set-form --slug S [--name N] [--category slug=Label]…  the public form's display name and categories
  tenants set-origins --slug S [--origin O]…  trusted browser origins of the tenant's public intake
  tenants list                               every tenant's id and slug
  tenants set-portal --slug S [--show-priority] [--show-team]  internal fields the portal reads show requesters (none by default)
  principals create --tenant S --name N --role admin|operator|viewer|integration [--team T] [--ttl D]
                                             create a principal; prints its token once
  principals list --tenant S                 id, name, role, team, disabled, linked Slack users (never tokens)
  principals disable|enable --tenant S --id P [--reason R]
                                             a disabled principal's tokens, console sessions and Slack
                                             users are refused from the next request on
  principals set-role --tenant S --id P --role R [--reason R]
  principals set-team --tenant S --id P --team T [--reason R]   (--team "" clears it)
  projections list|parked|retry|skip         subscriber state; release parked streams
  replay --projection P [--keep-old] [--dry-run]
                                             rebuild a projection and switch to it
  tokens create --tenant S --principal ID [--ttl D]
                                             mint another token for a principal; prints it once
  tokens revoke --tenant S (--id TOKEN_ID | --principal ID)
  tokens list --tenant S [--principal ID]    token ids, expiry and revocation (never the secrets)
  bench [--intakes N] [--concurrency C] [--rate N/s] [--keep]
                                             intake vs a same-process baseline, CPU per subscriber,
                                             acknowledged-to-visible latency, command throughput
  slack manifest|install|install-link|destination|link-user|unlink-user|escalation
                                             the app manifest; install the bot; choose channels (threads,
                                             escalation posts); link and unlink Slack users
  effects list|retry|cancel|circuits|circuit-close
                                             Slack effect jobs and destination circuits
  lists create|activate|deactivate|check|circuit-close|status|reconcile|working-set
                                             Slack List projections (disabled until activated)
  sla set|show --tenant S [--file policy.json]
                                             a tenant's SLA policy: zone, business hours, holidays, targets
  jobs list|show|retry|cancel|resolve --tenant S [--id J] [--state S] [--reason R]
                                             due jobs (follow-ups, SLA warnings and breaches, escalations);
                                             reviewed manual recovery
  erase --tenant S --inquiry ID              crypto-shred an inquiry's personal data (refused under legal hold)
  keys rotate|seal-legacy                    wrap data keys under a new master key; seal events written before sealing
  export --tenant S --email E [--out FILE]   what Casebook holds about a requester, as JSON (audited)
  retention set|show|sweep [--tenant S] [--file policy.json] [--dry-run [--at T]]
                                             a tenant's retention policy; run (or preview) the retention job once
  backup --to FILE [--force]                 a consistent copy of the embedded database, while serve runs
  restore --from FILE                        check a backup, keep the current database aside, put the backup
                                             in its place (refused while serve runs)
  dev fake-slack [--addr A] [--non-marketplace]
                                             serve the fake Slack Web API for local demos
  version                                    print the version, commit and Go version

Run 'casebook <command> -h' for the flags of a command. Commands print their result on stdout
and log nothing on success unless -v is given; serve logs JSON lines on stderr.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	if len(rest) > 0 && isHelp(rest[0]) && !leafCommands[cmd] && groupHelp(stdout, cmd) {
		return nil // casebook <group> -h
	}
	switch cmd {
	case "serve":
		return serve(ctx, rest, stderr)
	case "migrate":
		return migrate(ctx, rest, stdout, stderr)
	case "tenants":
		return tenants(ctx, rest, stdout, stderr)
	case "principals":
		return principals(ctx, rest, stdout, stderr)
	case "tokens":
		return tokens(ctx, rest, stdout, stderr)
	case "bench":
		return bench(ctx, rest, stdout, stderr)
	case "projections":
		return projectionsCmd(ctx, rest, stdout, stderr)
	case "replay":
		return replay(ctx, rest, stdout, stderr)
	case "slack":
		return slackCmd(ctx, rest, stdout, stderr)
	case "effects":
		return effectsCmd(ctx, rest, stdout, stderr)
	case "lists":
		return listsCmd(ctx, rest, stdout, stderr)
	case "sla":
		return slaCmd(ctx, rest, stdout, stderr)
	case "jobs":
		return jobsCmd(ctx, rest, stdout, stderr)
	case "erase":
		return eraseCmd(ctx, rest, stdout, stderr)
	case "retention":
		return retentionCmd(ctx, rest, stdout, stderr)
	case "keys":
		return keysCmd(ctx, rest, stdout, stderr)
	case "export":
		return exportCmd(ctx, rest, stdout, stderr)
	case "dev":
		return devCmd(ctx, rest, stdout, stderr)
	case "backup":
		return backupCmd(ctx, rest, stdout, stderr)
	case "restore":
		return restoreCmd(ctx, rest, stdout, stderr)
	case "version", "--version":
		return version(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "casebook: unknown command %q\n%s", cmd, usage)
		return errUsage
	}
}

// storageFlags are shared by every subcommand.
type storageFlags struct {
	dataDir       string
	databaseURL   string
	eventStoreURL string
	leaseTTL      time.Duration
	verbose       bool
	public        httpapi.PublicConfig // serve only
	// creates marks the commands that may create the embedded database (migrate, tenants create);
	// the others refuse a data directory without one rather than leave an empty database there.
	creates bool
	// masterKeyFile and masterKeyPrevious name the master key files (keys.go).
	masterKeyFile     string
	masterKeyPrevious []string
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// newFlags is a subcommand's flag set with the storage flags; --lease-ttl only for the commands
// that run subscribers, -v for every command but serve (which always logs).
func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *storageFlags) {
	fs := flag.NewFlagSet("casebook "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := &storageFlags{leaseTTL: 15 * time.Second}
	fs.StringVar(&sf.dataDir, "data-dir", envOr("CASEBOOK_DATA_DIR", "./casebook-data"), "directory of the embedded SQLite storage (CASEBOOK_DATA_DIR)")
	fs.StringVar(&sf.databaseURL, "database-url", envOr("CASEBOOK_DATABASE_URL", ""), "Postgres URL: events, query model, checkpoints and keys (CASEBOOK_DATABASE_URL)")
	fs.StringVar(&sf.eventStoreURL, "eventstore-url", envOr("CASEBOOK_EVENTSTORE_URL", ""), "KurrentDB/EventStoreDB URL (esdb://…) for events; needs --database-url (CASEBOOK_EVENTSTORE_URL)")
	switch name {
	case "serve", "replay", "bench":
		ttl, err := time.ParseDuration(envOr("CASEBOOK_LEASE_TTL", "15s"))
		if err != nil {
			ttl = 15 * time.Second
		}
		fs.DurationVar(&sf.leaseTTL, "lease-ttl", ttl, "how long a dead replica keeps its subscribers, Postgres modes (CASEBOOK_LEASE_TTL)")
	}
	if name != "serve" {
		fs.BoolVar(&sf.verbose, "v", false, "log what the command does (JSON lines on stderr)")
	}
	masterKeyFlags(fs, sf)
	return fs, sf
}

func logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// open opens the storage; without -v the command logs nothing.
func (sf *storageFlags) open(ctx context.Context, log *slog.Logger) (*app.App, error) {
	if !sf.verbose {
		log = slog.New(slog.DiscardHandler)
	}
	if sf.databaseURL == "" && !sf.creates {
		if _, err := os.Stat(filepath.Join(sf.dataDir, app.DBFile)); errors.Is(err, os.ErrNotExist) { //nolint:gosec // the operator names the data directory
			return nil, fmt.Errorf("no Casebook data in %s: casebook serve or casebook migrate creates it; "+
				"pass --data-dir (CASEBOOK_DATA_DIR) to use another directory", sf.dataDir)
		}
	}
	cfg := sf.config(log)
	var err error
	if cfg.DataKeys, err = sf.masterKeys(); err != nil {
		return nil, err
	}
	return app.Open(ctx, cfg)
}

func (sf *storageFlags) config(log *slog.Logger) app.Config {
	return app.Config{DataDir: sf.dataDir, DatabaseURL: sf.databaseURL, EventStoreURL: sf.eventStoreURL, LeaseTTL: sf.leaseTTL,
		Logger: log, Public: sf.public, PublicURL: envOr("CASEBOOK_PUBLIC_URL", ""),
		SlackResponseURLPrefix: envOr("CASEBOOK_SLACK_RESPONSE_URL_PREFIX", "")}
}

// serverGCPercent is the garbage collector's target (GOGC) of serve and bench when the
// environment sets none. Through casebook serve on Postgres with 32 clients on two cores, 200
// against the runtime's 100 cut the process's CPU per intake by about 7 % and served 2,656-2,821
// against 2,520-2,720 req/s (3 pairs, 2 Dec 2026), with its peak RSS at 176-186 MB against 129-130
// MB; 400 served no more and reached 258-281 MB.
const serverGCPercent = 200

// setServerGC sets serverGCPercent unless getenv("GOGC") is set, and reports whether it did.
func setServerGC(getenv func(string) string) bool {
	if getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(serverGCPercent)
	return true
}

// serve runs the server. Its stderr carries JSON log lines only: a failure too is one (-h prints
// the flags); its stdout nothing.
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	log := logger(stderr)
	err := serveMain(ctx, args, stderr, log)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	log.Error("casebook serve failed", "err", err.Error())
	if errors.As(err, new(usageError)) {
		return usageError{errReported}
	}
	return errReported
}

// serveMain checks that the addresses can be listened on, then (embedded) takes the data
// directory's serve lock, and only then creates or migrates the storage and serves.
func serveMain(ctx context.Context, args []string, stderr io.Writer, log *slog.Logger) error {
	fs, sf := newFlags("serve", stderr)
	addr := fs.String("addr", envOr("CASEBOOK_ADDR", "127.0.0.1:8080"), "listen address (CASEBOOK_ADDR)")
	metricsAddr := fs.String("metrics-addr", envOr("CASEBOOK_METRICS_ADDR", ""),
		"serve /metrics only on this address, for operators' scrapers; empty: on --addr (CASEBOOK_METRICS_ADDR)")
	rebuildStale := fs.Bool("rebuild-stale", envOr("CASEBOOK_REBUILD_STALE", "") == "true",
		"rebuild in the background every projection built by another code version (CASEBOOK_REBUILD_STALE=true)")
	tickDefault, err := time.ParseDuration(envOr("CASEBOOK_DUE_TICK", "1s"))
	if err != nil || tickDefault <= 0 {
		return fmt.Errorf("CASEBOOK_DUE_TICK: want a positive duration such as 1s, got %q", os.Getenv("CASEBOOK_DUE_TICK"))
	}
	dueTick := fs.Duration("due-tick", tickDefault, "how often an idle ticker looks for due follow-ups, SLA warnings and escalations (CASEBOOK_DUE_TICK)")
	ttlDefault, err := time.ParseDuration(envOr("CASEBOOK_DUE_CLAIM_TTL", "1m"))
	if err != nil || ttlDefault <= 0 {
		return fmt.Errorf("CASEBOOK_DUE_CLAIM_TTL: want a positive duration such as 1m, got %q", os.Getenv("CASEBOOK_DUE_CLAIM_TTL"))
	}
	retDefault, err := time.ParseDuration(envOr("CASEBOOK_RETENTION_TICK", "5m"))
	if err != nil || retDefault <= 0 {
		return fmt.Errorf("CASEBOOK_RETENTION_TICK: want a positive duration such as 5m, got %q", os.Getenv("CASEBOOK_RETENTION_TICK"))
	}
	retentionTick := fs.Duration("retention-tick", retDefault, "how often the retention policy job sweeps (CASEBOOK_RETENTION_TICK)")
	dueClaimTTL := fs.Duration("due-claim-ttl", ttlDefault, "how long a claim on a due job holds before another ticker may take it over (CASEBOOK_DUE_CLAIM_TTL)")
	public := publicFlags(fs)
	signInLimit := consoleFlags(fs)
	oauth := slackOAuthFlags(fs)
	effects := slackEffectFlags(fs)
	attachments := attachmentFlags(fs)
	tenantCache := tenantCacheFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	setServerGC(os.Getenv)
	if *dueTick <= 0 || *dueClaimTTL <= 0 || *retentionTick <= 0 {
		return errors.New("serve: --due-tick, --due-claim-ttl and --retention-tick must be positive")
	}
	if sf.public, err = public(); err != nil {
		return err
	}
	cfg := sf.config(log)
	if cfg.DataKeys, err = sf.masterKeys(); err != nil {
		return err
	}
	cfg.RebuildStale = *rebuildStale
	cfg.MetricsAddr = *metricsAddr
	cfg.SlackOAuth = *oauth
	cfg.DueTick, cfg.DueClaimTTL, cfg.RetentionTick = *dueTick, *dueClaimTTL, *retentionTick
	if cfg.ConsoleSignInRate, err = signInLimit(); err != nil {
		return err
	}
	if err := effects(&cfg); err != nil {
		return err
	}
	if err := attachments(&cfg); err != nil {
		return err
	}
	if err := tenantCache(&cfg); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *addr)
	if err != nil {
		return fmt.Errorf("cannot listen on --addr %s (CASEBOOK_ADDR): %w", *addr, err)
	}
	defer ln.Close() // Serve closes it too; this is for the failures before
	if *metricsAddr != "" {
		if cfg.MetricsListener, err = (&net.ListenConfig{}).Listen(ctx, "tcp", *metricsAddr); err != nil {
			return fmt.Errorf("cannot listen on --metrics-addr %s (CASEBOOK_METRICS_ADDR): %w", *metricsAddr, err)
		}
		defer cfg.MetricsListener.Close()
	}
	if cfg.DatabaseURL == "" {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		unlock, err := app.LockDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		defer unlock()
		cfg.DataDirLocked = true
	}
	a, err := app.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	log.Info("console", "url", consoleBase(cfg.PublicURL, ln.Addr().String())+"/console", "sign_in", "an operator token")
	return a.Serve(ctx, ln)
}

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("migrate", stderr)
	sf.creates = true
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	return printJSON(stdout, map[string]string{"status": "migrated"})
}

func tenants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "set-origins" {
		return setOrigins(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "set-form" {
		return setForm(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "list" {
		return tenantsList(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "set-portal" {
		return setPortal(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "create" {
		return errors.New("usage: casebook tenants create --slug S [--name N] [--ttl D] | list | set-origins --slug S [--origin O]… | set-form --slug S [--name N] [--category slug=Label]… | set-portal --slug S [--show-priority] [--show-team]")
	}
	fs, sf := newFlags("tenants create", stderr)
	sf.creates = true
	slug := fs.String("slug", "", required+"tenant slug (a-z, 0-9, -)")
	name := fs.String("name", "", "display name shown on the public form (default: the slug)")
	ttl := ttlFlag(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	a.Tenancy.TokenTTL = *ttl
	t, _, token, err := a.Tenancy.CreateTenant(ctx, *slug)
	if errors.Is(err, domain.ErrConflict) {
		return fmt.Errorf("tenant %q already exists", *slug)
	}
	if err != nil {
		return err
	}
	out, err := tokenJSON(ctx, a, t.ID, token)
	if err != nil {
		return err
	}
	out["tenant_id"], out["slug"], out["admin_token"] = t.ID, t.Slug, token
	if *name != "" {
		p, err := a.Tenancy.SetProfile(ctx, t.Slug, name, nil)
		if err != nil {
			return fmt.Errorf("tenant %s was created, but its name was not set (retry with tenants set-form): %w", t.Slug, err)
		}
		out["name"] = p.Name
	}
	return printJSON(stdout, out)
}

func principals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return principalsList(ctx, args[1:], stdout, stderr)
		case "disable", "enable", "set-role", "set-team":
			return principalsChange(ctx, args[0], args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || args[0] != "create" {
		return errors.New(principalsUsage)
	}
	fs, sf := newFlags("principals create", stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	name := fs.String("name", "", required+"display name")
	role := fs.String("role", "operator", "admin, operator, viewer or integration (submits inquiries and reads its own submissions only)")
	team := fs.String("team", "", "team (operators assign within their team)")
	ttl := ttlFlag(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	a.Tenancy.TokenTTL = *ttl
	p, token, err := a.Tenancy.CreatePrincipal(ctx, *tenant, commands.Normalize(*name, false), domain.Role(*role), *team)
	if err != nil {
		return err
	}
	out, err := tokenJSON(ctx, a, p.TenantID, token)
	if err != nil {
		return err
	}
	out["principal_id"], out["token"] = p.ID, token
	return printJSON(stdout, out)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
