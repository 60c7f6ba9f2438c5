package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/ratelimit"
)

// bench starts an in-process server on loopback and measures, over HTTP:
//   - intake requests/s with p50/p99 at --concurrency clients, alternating --rounds times with a
//     baseline served by the same process: decode the JSON and do one INSERT per request (embedded:
//     a SQLite file in WAL mode with synchronous=FULL beside the data directory's file, on the same
//     file system; Postgres: a plain single-row INSERT on the same database), which starts once every
//     subscriber has applied Casebook's round (catch_up_ms). The lowest Casebook/baseline ratio of
//     the rounds is reported;
//   - the CPU per intake of the whole process and of each subscriber (from a CPU profile of the
//     first Casebook round; subscribers' goroutines carry projections.ProfileLabel);
//   - the latency from an acknowledged intake to its visibility in GET /v1/inquiries/{id}, and to a
//     consistent=true read of it, at a fixed offered rate (--rate), after a warm-up at that rate
//     (--visibility-warmup) reported apart (see measureVisibility), and
//   - operator commands/s (triage, claim, resolve).
//
// Storage: a temporary data directory by default (removed afterwards). An explicit --data-dir
// must hold no events unless --keep, and keeps what the bench wrote. With --database-url the bench
// runs in a throw-away schema that it drops afterwards; with --keep it runs in the URL's own
// schema and leaves its data there.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, sf, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	setServerGC(os.Getenv) // as serve's, for both Casebook and the baseline
	e := &benchEnv{o: o, stderr: stderr}
	defer e.close()
	if err := e.setup(ctx, sf); err != nil {
		return err
	}
	rs, cpu, err := e.intakeRounds(ctx)
	if err != nil {
		return err
	}
	if err := waitAllCaughtUp(ctx, e.a); err != nil {
		return err
	}
	lane := snapLane(e.a).since(e.laneBefore, o.n*o.rounds)
	vis, err := e.visibilityFigures(ctx)
	if err != nil {
		return err
	}
	cmds, err := measureCommands(ctx, e.a, e.client, e.base, e.token, o.n, o.conc)
	if err != nil {
		return err
	}
	return printJSON(stdout, e.report(rs, cpu, vis, cmds, lane))
}

// benchOptions are the bench's own flags.
type benchOptions struct {
	n, conc, rounds, visN int
	rate                  ratelimit.Rate
	warmup                time.Duration
	cpuProfile            string
	keep, intakeOnly      bool
	explicitDir           bool
	tenantCache           func(*app.Config) error
}

func parseBenchFlags(args []string, stderr io.Writer) (benchOptions, *storageFlags, error) {
	fs, sf := newFlags("bench", stderr)
	n := fs.Int("intakes", 2000, "intake requests per round")
	conc := fs.Int("concurrency", 16, "concurrent clients")
	rounds := fs.Int("rounds", 2, "rounds of Casebook then baseline; the lowest ratio is reported")
	rateSpec := fs.String("rate", "1000/s", "offered intake rate for the acknowledged-to-visible latency (N/s; off skips it)")
	visN := fs.Int("visibility-intakes", 3000, "intakes offered at --rate")
	warmup := fs.Duration("visibility-warmup", time.Second, "offered load at --rate before the visibility figures, reported apart (0: none)")
	cpuProfile := fs.String("cpuprofile", "", "also write the first Casebook round's CPU profile to this file (go tool pprof)")
	keep := fs.Bool("keep", false, "allow a database that already holds events, and keep what the bench writes")
	intakeOnly := fs.Bool("intake-only", false, "also run each round with the subscribers held (they catch up afterwards): the intake path's own throughput")
	tenantCache := tenantCacheFlag(fs)
	fs.Lookup("data-dir").DefValue = "(a temporary directory)"
	if err := parseFlags(fs, args); err != nil {
		return benchOptions{}, nil, err
	}
	o := benchOptions{n: *n, conc: *conc, rounds: *rounds, visN: *visN, warmup: *warmup, cpuProfile: *cpuProfile,
		keep: *keep, intakeOnly: *intakeOnly, tenantCache: tenantCache}
	fs.Visit(func(f *flag.Flag) { o.explicitDir = o.explicitDir || f.Name == "data-dir" })
	if o.n < 1 || o.conc < 1 || o.rounds < 1 || o.visN < 1 {
		return o, nil, errors.New("--intakes, --concurrency, --rounds and --visibility-intakes must be positive")
	}
	if o.warmup < 0 {
		return o, nil, errors.New("--visibility-warmup must not be negative")
	}
	var err error
	if o.rate, err = ratelimit.ParseRate(*rateSpec); err != nil {
		return o, nil, fmt.Errorf("--rate: %w", err)
	}
	if sf.eventStoreURL != "" {
		return o, nil, errors.New("bench measures the embedded and Postgres modes; --eventstore-url is not supported")
	}
	return o, sf, nil
}
