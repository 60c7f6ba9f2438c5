package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/casebook/casebook/projections"
)

// projectionsCmd: casebook projections list|parked|retry|skip.
func projectionsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "usage: casebook projections list | parked [--projection P] | retry|skip --projection P --stream S"
	if len(args) == 0 {
		return errors.New(use)
	}
	fs, sf := newFlags("projections "+args[0], stderr)
	name := fs.String("projection", "querymodel", "projection name")
	var stream *string
	switch args[0] {
	case "list", "parked":
		stream = new(string)
	case "retry", "skip":
		stream = fs.String("stream", "", required+"parked stream (see casebook projections parked)")
	default:
		return errors.New(use)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	switch args[0] {
	case "list":
		var out []projections.Description
		for _, r := range a.Runners {
			d, err := projections.Describe(ctx, a.DB, a.Store, r.Projection)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return printJSON(stdout, out)
	case "parked":
		items, err := a.Parked(ctx, *name, "")
		if err != nil {
			return err
		}
		return printJSON(stdout, items)
	case "retry", "skip":
		still, err := a.RetryParked(ctx, *name, "", *stream, args[0] == "skip")
		if err != nil {
			return err
		}
		if still != nil {
			return printJSON(stdout, map[string]any{"released": false, "parked": still})
		}
		return printJSON(stdout, map[string]any{"released": true})
	}
	return errors.New(use)
}

// replay rebuilds a projection into a new generation and switches to it.
func replay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("replay", stderr)
	name := fs.String("projection", "", required+"projection to rebuild (see casebook projections list)")
	keepOld := fs.Bool("keep-old", false, "keep the previous generation's tables after the switch")
	dryRun := fs.Bool("dry-run", false, "build a throwaway generation, switch nothing, print the effects that would be emitted")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("usage: casebook replay --projection NAME [--keep-old] [--dry-run]")
	}
	log := logger(stderr)
	a, err := sf.open(ctx, log)
	if err != nil {
		return err
	}
	defer a.Close()
	p, err := a.Projection(*name)
	if err != nil {
		return err
	}
	defer projections.TuneGCForReplay()() // this process only rebuilds
	bar := newProgress(stderr)
	res, err := projections.Rebuild(ctx, a.Store, a.DB, p, projections.RebuildOptions{
		KeepOld: *keepOld, DryRun: *dryRun, Logger: log, Progress: bar.update, LeaseTTL: sf.leaseTTL,
	})
	bar.finish()
	if err != nil {
		return err
	}
	return printJSON(stdout, res)
}

// progress draws a bar on a terminal and writes plain log lines elsewhere.
type progress struct {
	w     io.Writer
	tty   bool
	log   *slog.Logger
	drawn bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, log: logger(w)}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(pr projections.Progress) {
	total := int64(pr.Processed) + max(pr.Remaining, 0)
	eta := "?"
	if pr.EventsPerSec > 0 && pr.Remaining >= 0 {
		eta = (time.Duration(float64(pr.Remaining)/pr.EventsPerSec) * time.Second).Round(time.Second).String()
	}
	if !p.tty {
		p.log.Info("rebuild progress", "projection", pr.Projection, "generation", pr.Generation, "processed", pr.Processed,
			"remaining", pr.Remaining, "events_per_second", int64(pr.EventsPerSec), "eta", eta, "done", pr.Done)
		return
	}
	const width = 30
	frac := 1.0
	if total > 0 {
		frac = float64(pr.Processed) / float64(total)
	}
	n := int(frac * width)
	fmt.Fprintf(p.w, "\r%s g%d [%s%s] %3.0f%% %d/%d events  %.0f ev/s  ETA %s ",
		pr.Projection, pr.Generation, strings.Repeat("=", n), strings.Repeat(" ", width-n), frac*100, pr.Processed, total, pr.EventsPerSec, eta)
	p.drawn = true
}

func (p *progress) finish() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}
