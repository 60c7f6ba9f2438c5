package app_test

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/pgtest"
)

// TestMigrateConcurrently opens (and so migrates) the same fresh database from several processes'
// worth of handles at once, twice over: every open succeeds and the schema is usable.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T) app.Config{
		"embedded": func(t *testing.T) app.Config { return app.Config{DataDir: filepath.Join(t.TempDir(), "d")} },
		"postgres": func(t *testing.T) app.Config { return app.Config{DatabaseURL: pgtest.URL(t)} },
	}
	for name, cfgFor := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := cfgFor(t)
			cfg.Logger = slog.New(slog.DiscardHandler)
			for round := range 2 {
				var wg sync.WaitGroup
				errs := make([]error, 4)
				for i := range errs {
					wg.Go(func() {
						a, err := app.Open(t.Context(), cfg)
						if err == nil {
							err = a.Close()
						}
						errs[i] = err
					})
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d, open %d: %v", round, i, err)
					}
				}
			}
			a, err := app.Open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if _, _, _, err := a.Tenancy.CreateTenant(t.Context(), "acme"); err != nil {
				t.Fatalf("schema unusable after concurrent migrations: %v", err)
			}
		})
	}
}
