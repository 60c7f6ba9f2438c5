package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

type benchOut struct {
	Storage string `json:"storage"`
	Rounds  []struct {
		Casebook      result  `json:"casebook"`
		CatchUpMillis float64 `json:"catch_up_ms"`
		Baseline      result  `json:"baseline"`
		Ratio         float64 `json:"ratio"`

		IntakeOnly       *result `json:"intake_only"`
		IntakeOnlyRatio  float64 `json:"intake_only_ratio"`
		BatchesWhileHeld uint64  `json:"batches_while_held"`
	} `json:"rounds"`
	LowestRatio float64 `json:"lowest_ratio"`
	CPU         *struct {
		ProcessMillis float64             `json:"process_ms_per_intake"`
		Subscribers   map[string]cpuShare `json:"subscribers"`
	} `json:"cpu"`
	Visibility *struct {
		Intakes        result `json:"intake"`
		Visible        result `json:"ack_to_visible"`
		Applied        result `json:"ack_to_applied"`
		ConsistentRead result `json:"ack_to_consistent_read"`
		Skipped        int64  `json:"skipped"`
		Warmup         *struct {
			Visible        result `json:"ack_to_visible"`
			ConsistentRead result `json:"ack_to_consistent_read"`
		} `json:"warmup"`
	} `json:"visibility"`
	Commands      result `json:"commands"`
	StorageWrites struct {
		Group struct {
			Calls uint64 `json:"calls"`
		} `json:"group_commit"`
	} `json:"storage_writes"`
}

func runBench(t *testing.T, args ...string) (benchOut, error) {
	t.Helper()
	return runBenchCtx(t, t.Context(), args...)
}

func runBenchCtx(t *testing.T, ctx context.Context, args ...string) (benchOut, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := bench(ctx, args, &stdout, &stderr)
	var out benchOut
	if err == nil {
		if jerr := json.Unmarshal(stdout.Bytes(), &out); jerr != nil {
			t.Fatalf("bench output: %v\n%s", jerr, stdout.String())
		}
	}
	return out, err
}

// checkBench asserts that every phase ran its requests without errors.
func checkBench(t *testing.T, out benchOut, intakes int, wantGroupCalls bool) {
	t.Helper()
	if len(out.Rounds) != 1 {
		t.Fatalf("%d rounds, want 1", len(out.Rounds))
	}
	r := out.Rounds[0]
	for name, res := range map[string]result{"casebook": r.Casebook, "baseline": r.Baseline} {
		if res.Requests != intakes || res.Errors != 0 || res.PerSecond <= 0 {
			t.Errorf("%s round: %+v, want %d requests without errors", name, res, intakes)
		}
	}
	if r.CatchUpMillis <= 0 {
		t.Errorf("catch_up_ms %v: the subscribers' catch-up before the baseline was not measured", r.CatchUpMillis)
	}
	if r.Ratio <= 0 || out.LowestRatio != r.Ratio {
		t.Errorf("ratio %v, lowest %v", r.Ratio, out.LowestRatio)
	}
	// Alternate intakes measure each delay: the even ones ack → visible, the odd ones a consistent read.
	if v := out.Visibility; v == nil || v.Intakes.Requests != intakes || v.Skipped != 0 ||
		v.Visible.Requests != (intakes+1)/2 || v.Visible.Errors != 0 || v.Visible.P99Millis <= 0 ||
		v.ConsistentRead.Requests != intakes/2 || v.ConsistentRead.P99Millis <= 0 {
		t.Errorf("visibility: %+v, want %d measured intakes, half of them each way", v, intakes)
	}
	// The wait for the query model ends before the GET that follows it, intake by intake, so
	// every percentile of the one is at most the other's.
	if v := out.Visibility; v != nil && (v.Applied.Requests != v.Visible.Requests || v.Applied.P50Millis > v.Visible.P50Millis ||
		v.Applied.P99Millis > v.Visible.P99Millis || v.Applied.MaxMillis > v.Visible.MaxMillis) {
		t.Errorf("ack → applied %+v against ack → visible %+v: want as many, none later", v.Applied, v.Visible)
	}
	if out.Commands.Requests == 0 || out.Commands.Errors != 0 {
		t.Errorf("commands: %+v", out.Commands)
	}
	if out.CPU == nil || out.CPU.ProcessMillis <= 0 {
		t.Errorf("cpu: %+v", out.CPU)
	}
	// Every intake appends an event and an audit row through the group commit (embedded).
	if wantGroupCalls && out.StorageWrites.Group.Calls < uint64(2*intakes) {
		t.Errorf("group commit calls %d, want at least %d", out.StorageWrites.Group.Calls, 2*intakes)
	}
}

// The bench tests run one at a time: the CPU profiler each bench starts is process-wide.

// TestBenchEmbedded runs every phase of casebook bench on a small load. Each round's baseline
// starts only once every subscriber has applied the log: their backlog would compete with it.
func TestBenchEmbedded(t *testing.T) {
	baselines := 0
	ctx := context.WithValue(t.Context(), beforeBaselineKey{}, func(a *app.App) {
		baselines++
		head, err := a.Store.Head(t.Context())
		if err != nil {
			t.Error(err)
			return
		}
		for _, r := range a.Runners {
			if st := r.Status(); st.Position.Less(head) {
				t.Errorf("the baseline started with %s at %v of %v", st.Name, st.Position, head)
			}
		}
	})
	out, err := runBenchCtx(t, ctx, "--intakes", "60", "--concurrency", "4", "--rounds", "1", "--rate", "200/s", "--visibility-intakes", "60",
		"--visibility-warmup", "100ms")
	if err != nil {
		t.Fatal(err)
	}
	if baselines != 1 {
		t.Errorf("%d baselines checked, want 1", baselines)
	}
	if out.Storage != "embedded" {
		t.Fatalf("storage %q", out.Storage)
	}
	checkBench(t, out, 60, true)
	// The warm-up (100 ms at 200/s) is measured apart; checkBench saw only the 60 that follow it.
	if w := out.Visibility.Warmup; w == nil || w.Visible.Requests+w.ConsistentRead.Requests != 20 || w.Visible.Errors != 0 {
		t.Errorf("warm-up: %+v, want 20 intakes measured apart", w)
	}
	if r := out.Rounds[0]; r.IntakeOnly != nil {
		t.Errorf("intake-only figures without --intake-only: %+v", r.IntakeOnly)
	}
}

// TestBenchIntakeOnly: --intake-only adds a run of the same intakes with every subscriber held,
// during which no subscriber batch is applied, and the subscribers catch up afterwards (the
// visibility and command phases, which read through the query model, still pass).
func TestBenchIntakeOnly(t *testing.T) {
	out, err := runBench(t, "--intakes", "40", "--concurrency", "4", "--rounds", "1", "--rate", "200/s", "--visibility-intakes", "40", "--intake-only",
		"--visibility-warmup", "0")
	if err != nil {
		t.Fatal(err)
	}
	checkBench(t, out, 40, true)
	if out.Visibility.Warmup != nil {
		t.Errorf("warm-up figures with --visibility-warmup 0: %+v", out.Visibility.Warmup)
	}
	r := out.Rounds[0]
	if r.IntakeOnly == nil || r.IntakeOnly.Requests != 40 || r.IntakeOnly.Errors != 0 || r.IntakeOnlyRatio <= 0 {
		t.Fatalf("intake-only: %+v, ratio %v; want 40 requests without errors", r.IntakeOnly, r.IntakeOnlyRatio)
	}
	if r.BatchesWhileHeld != 0 {
		t.Fatalf("%d subscriber batches applied while held, want 0", r.BatchesWhileHeld)
	}
}

// TestBenchRefusesDatabaseWithEvents: an explicit data directory that holds events is refused
// without --keep (the bench's inquiries would stay in its log), and accepted with it.
func TestBenchRefusesDatabaseWithEvents(t *testing.T) {
	dir := t.TempDir()
	small := []string{"--data-dir", dir, "--intakes", "5", "--concurrency", "2", "--rounds", "1", "--rate", "off"}
	if _, err := runBench(t, small...); err != nil {
		t.Fatalf("first run on an empty directory: %v", err)
	}
	_, err := runBench(t, small...)
	if err == nil || !strings.Contains(err.Error(), "--keep") {
		t.Fatalf("second run without --keep = %v, want a refusal naming --keep", err)
	}
	if _, err := runBench(t, append(small, "--keep")...); err != nil {
		t.Fatalf("with --keep: %v", err)
	}
	if _, err := os.Stat(dir + "/bench-baseline.db"); !os.IsNotExist(err) {
		t.Fatalf("the baseline's file stayed in the data directory: %v", err)
	}
}

// TestBenchPostgresDropsItsSchema: against Postgres the bench runs in a throw-away schema and
// drops it; the database's own schema is untouched.
func TestBenchPostgresDropsItsSchema(t *testing.T) {
	url := pgtest.URL(t)
	out, err := runBench(t, "--database-url", url, "--intakes", "40", "--concurrency", "4", "--rounds", "1", "--rate", "200/s", "--visibility-intakes", "40",
		"--visibility-warmup", "0")
	if err != nil {
		t.Fatal(err)
	}
	if out.Storage != "postgres" {
		t.Fatalf("storage %q", out.Storage)
	}
	checkBench(t, out, 40, false)
	db, err := sqldb.OpenPostgres(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables, schemas int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'casebook_bench_%'`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if tables != 0 || schemas != 0 {
		t.Fatalf("after the bench: %d tables in the database's schema, %d bench schemas left; want none", tables, schemas)
	}
}
