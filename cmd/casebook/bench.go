package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/internal/app"
	"github.com/casebook/casebook/internal/ratelimit"
)

// bench starts an in-process server on loopback over a fresh data directory (unless --data-dir is
// given), then measures intake requests/s with latency percentiles, and operator commands/s
// (triage, claim, resolve) over HTTP. The load is bounded by --intakes.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("bench", stderr)
	n := fs.Int("intakes", 2000, "number of intake requests")
	conc := fs.Int("concurrency", 16, "concurrent clients")
	fs.Lookup("data-dir").DefValue = "(a temporary directory)"
	explicit := false
	if err := fs.Parse(args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "data-dir" })
	if !explicit {
		dir, err := os.MkdirTemp("", "casebook-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		sf.dataDir = dir
	}
	if *n < 1 || *conc < 1 {
		return fmt.Errorf("--intakes and --concurrency must be positive")
	}
	off := ratelimit.Rate{Off: true} // one loopback client: the public rate limits would measure themselves
	cfg := sf.config(slog.New(slog.DiscardHandler))
	cfg.Public = httpapi.PublicConfig{ClientRate: off, TenantRate: off}
	a, err := app.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Serve(sctx, ln) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			fmt.Fprintln(stderr, "bench server:", err)
		}
	}()
	base := "http://" + ln.Addr().String()
	t, _, token, err := a.Tenancy.CreateTenant(ctx, fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9))
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc}}

	intake := measure(*n, *conc, func(i int) error {
		body := fmt.Sprintf(`{"name":"Bench %d","email":"bench%d@example.com","subject":"Bench","message":"Load test"}`, i, i)
		_, err := call(client, http.MethodPost, base+"/v1/public/"+t.Slug+"/inquiries", "", map[string]string{"Idempotency-Key": fmt.Sprint("bench-", i)}, body, http.StatusAccepted)
		return err
	})

	// Operator commands on a sample of the inquiries just received.
	var ids []string
	cursor := ""
	for len(ids) < min(*n, 300) {
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		u := base + "/v1/inquiries?limit=100&min_position=" + mustHead(ctx, a)
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		b, err := call(client, http.MethodGet, u, token, nil, "", http.StatusOK)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return err
		}
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	steps := []struct{ path, body string }{
		{"/transitions", `{"to":"triaged","priority":"high"}`},
		{"/claim", ``},
		{"/transitions", `{"to":"resolved"}`},
	}
	cmds := measureInquiries(ids, *conc, func(id string) error {
		version := uint64(1)
		for _, st := range steps {
			h := map[string]string{"If-Match": fmt.Sprintf(`"%d"`, version)}
			b, err := call(client, http.MethodPost, base+"/v1/inquiries/"+id+st.path, token, h, st.body, http.StatusOK)
			if err != nil {
				return err
			}
			var res struct {
				Version uint64 `json:"version"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				return err
			}
			version = res.Version
		}
		return nil
	}, len(steps))
	return printJSON(stdout, map[string]any{
		"storage": a.Mode(), "concurrency": *conc,
		"intake":   intake,
		"commands": cmds,
	})
}

type result struct {
	Requests   int     `json:"requests"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"per_second"`
	P50Millis  float64 `json:"p50_ms"`
	P99Millis  float64 `json:"p99_ms"`
	FirstError string  `json:"first_error,omitempty"`
}

func measure(n, conc int, fn func(i int) error) result {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := fn(i); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return summarize(lat, time.Since(start), errs.Load(), firstErr.Load())
}

func measureInquiries(ids []string, conc int, fn func(id string) error, perItem int) result {
	r := measure(len(ids), conc, func(i int) error { return fn(ids[i]) })
	// Report per command, not per inquiry.
	r.Requests *= perItem
	r.PerSecond *= float64(perItem)
	r.P50Millis /= float64(perItem)
	r.P99Millis /= float64(perItem)
	return r
}

func summarize(lat []time.Duration, total time.Duration, errs int64, first any) result {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	r := result{Requests: len(lat), Errors: errs, Seconds: total.Seconds(), PerSecond: float64(len(lat)) / total.Seconds(), P50Millis: pct(0.50), P99Millis: pct(0.99)}
	if s, ok := first.(string); ok {
		r.FirstError = s
	}
	return r
}

func mustHead(ctx context.Context, a *app.App) string {
	h, err := a.Store.Head(ctx)
	if err != nil {
		return "0.0"
	}
	return h.String()
}

func call(c *http.Client, method, url, token string, headers map[string]string, body string, want int) ([]byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: status %d: %s", method, url, resp.StatusCode, b)
	}
	return b, nil
}
