package app_test

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/queries"
)

// TestTimelinePages: on SQLite and Postgres, paging an inquiry's timeline by version returns every
// entry exactly once and in order, pages of at most limit with next naming the following page's
// after (none on the last), entries added while paging appear on later pages, a page past the end
// is empty, and an unknown or another tenant's inquiry is not found; LastTimelineEntry is the
// latest entry.
func TestTimelinePages(t *testing.T) {
	t.Parallel()
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		clock := apptest.NewClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
		cfg.Now, cfg.DueTick, cfg.Logger = clock.Now, -1, slog.New(slog.DiscardHandler)
		a := apptest.Open(t, cfg)
		ctx := t.Context()
		tenant, _, op := apptest.TenantWithOperator(t, a, "acme")
		other, _, _ := apptest.TenantWithOperator(t, a, "globex")
		id := apptest.Intake(t, a, tenant, "paged")
		note := func(i int) {
			t.Helper()
			clock.Advance(time.Minute)
			if _, err := a.Commands.AddNote(ctx, commands.AddNote{Target: commands.Target{Tenant: tenant, InquiryID: id, Actor: op}, Body: fmt.Sprint("note ", i)}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 24 {
			note(i)
		}
		apptest.CatchUp(t, a)
		var versions []uint64
		var after uint64
		for page := 0; ; page++ {
			items, next, err := a.Reader.TimelinePage(ctx, tenant, id, after, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) > 10 || (next != 0 && (len(items) != 10 || next != items[len(items)-1].Version)) {
				t.Fatalf("page %d: %d items, next %d", page, len(items), next)
			}
			for _, e := range items {
				versions = append(versions, e.Version)
			}
			if page == 1 { // written while paging: on a later page
				note(100)
				note(101)
				apptest.CatchUp(t, a)
			}
			if next == 0 {
				break
			}
			after = next
		}
		if len(versions) != 27 {
			t.Fatalf("versions %v", versions)
		}
		for i, v := range versions {
			if v != uint64(i+1) {
				t.Fatalf("versions %v", versions)
			}
		}
		all, next, err := a.Reader.TimelinePage(ctx, tenant, id, 0, 0)
		if err != nil || len(all) != 27 || next != 0 {
			t.Fatalf("default page: %d items, next %d, %v", len(all), next, err)
		}
		if items, next, err := a.Reader.TimelinePage(ctx, tenant, id, 27, 10); err != nil || len(items) != 0 || next != 0 {
			t.Fatalf("past the end: %v %d %v", items, next, err)
		}
		if items, _, err := a.Reader.TimelinePage(ctx, tenant, id, 0, queries.MaxTimelineLimit+1000); err != nil || len(items) != 27 {
			t.Fatalf("over the maximum: %d %v", len(items), err)
		}
		if last, err := a.Reader.LastTimelineEntry(ctx, tenant, id); err != nil || last.Version != 27 || last.Type != "NoteAdded" {
			t.Fatalf("last entry: %+v %v", last, err)
		}
		if _, err := a.Reader.LastTimelineEntry(ctx, other, id); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("another tenant's last entry: %v", err)
		}
		for _, c := range []struct {
			tenant domain.TenantID
			id     domain.InquiryID
		}{{other, id}, {tenant, "no-such-inquiry"}} {
			for _, after := range []uint64{0, 5} {
				if _, _, err := a.Reader.TimelinePage(ctx, c.tenant, c.id, after, 10); !errors.Is(err, domain.ErrNotFound) {
					t.Fatalf("%s/%s after %d: %v", c.tenant, c.id, after, err)
				}
			}
		}
	})
}
