package commands_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestAttachmentStoreBackends: bytes round-trip (SQLite BLOB, Postgres BYTEA), tenant-scoped
// reads, and the per-inquiry and per-tenant limits hold under concurrent uploads, all or none.
func TestAttachmentStoreBackends(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		a, _ := newAttachments(t, db)
		bin := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}
		got, err := a.Add(ctx, "t1", "i1", "p", []commands.NewFile{{Name: "a.png", ContentType: "image/png", Data: bin}}, commands.AttachmentLimits{})
		if err != nil {
			t.Fatal(err)
		}
		at, data, err := a.Get(ctx, "t1", "i1", got[0].ID)
		if err != nil || !bytes.Equal(data, bin) || at.Size != int64(len(bin)) || at.Name != "a.png" {
			t.Fatalf("get = %+v %v %v", at, data, err)
		}
		if _, _, err := a.Get(ctx, "t2", "i1", got[0].ID); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("another tenant's get: %v", err)
		}
		// Eight concurrent uploads of two files each on one inquiry allowing 5: at most two win,
		// whole; the tenant's bytes are counted across inquiries.
		lim := commands.AttachmentLimits{MaxFiles: 5, MaxTenantBytes: 1 << 20}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, _ = a.Add(ctx, "t1", "i2", "p", []commands.NewFile{{Name: "x", ContentType: "text/plain", Data: []byte("x")}, {Name: "y", ContentType: "text/plain", Data: []byte("y")}}, lim)
			})
		}
		wg.Wait()
		list, err := a.List(ctx, "t1", "i2")
		if err != nil || len(list) != 4 {
			t.Fatalf("after concurrent uploads: %d attachments, %v", len(list), err)
		}
		full := commands.AttachmentLimits{MaxTenantBytes: int64(len(bin)) + 4}
		if _, err := a.Add(ctx, "t1", "i3", "p", []commands.NewFile{{Name: "z", ContentType: "text/plain", Data: []byte("z")}}, full); !errors.Is(err, commands.ErrAttachmentQuota) {
			t.Fatalf("over the tenant quota: %v", err)
		}
		if _, err := a.Add(ctx, "t2", "i3", "p", []commands.NewFile{{Name: "z", ContentType: "text/plain", Data: []byte("z")}}, full); err != nil {
			t.Fatalf("another tenant's quota is its own: %v", err)
		}
	})
}

func newAttachments(t *testing.T, db *sqldb.DB) (*commands.Attachments, *sealed.Keys) {
	t.Helper()
	keys, err := sealed.NewKeys(t.Context(), db, nil, bytes.Repeat([]byte("m"), 32))
	if err != nil {
		t.Fatal(err)
	}
	a, err := commands.NewAttachments(t.Context(), db, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, keys
}

// TestAttachmentsSealedAtRest: a file's bytes and name are stored sealed with the inquiry's data
// key (no column holds either in clear) and read back opened; a row stored before sealing reads as
// it is; once the key is destroyed, before any retry deletes them, leftover rows (sealed or not)
// download as not found and are not listed at all (no name, size or digest), a new upload is
// refused, and Destroy deletes the rows (erasure). On SQLite and Postgres.
func TestAttachmentsSealedAtRest(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		a, keys := newAttachments(t, db)
		content, name := []byte("Content-Saffron-7781 of the file"), "Name-Juniper-3390.txt"
		got, err := a.Add(ctx, "t1", "i1", "p", []commands.NewFile{{Name: name, ContentType: "text/plain; charset=utf-8", Data: content}}, commands.AttachmentLimits{})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.QueryContext(ctx, `SELECT name, name_sealed, data FROM inquiry_attachments`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			var ns, d []byte
			if err := rows.Scan(&n, &ns, &d); err != nil {
				t.Fatal(err)
			}
			for _, col := range [][]byte{[]byte(n), ns, d} {
				if bytes.Contains(col, []byte("Saffron")) || bytes.Contains(col, []byte("Juniper")) {
					t.Errorf("a column holds plaintext: %q", col)
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		_ = rows.Close()
		at, data, err := a.Get(ctx, "t1", "i1", got[0].ID)
		if err != nil || !bytes.Equal(data, content) || at.Name != name {
			t.Fatalf("get = %+v %q %v", at, data, err)
		}
		if list, err := a.List(ctx, "t1", "i1"); err != nil || len(list) != 1 || list[0].Name != name {
			t.Fatalf("list = %+v %v", list, err)
		}

		// A row from before sealing: read both.
		if _, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO inquiry_attachments (tenant_id, inquiry_id, id, name, content_type, size, sha256, added_by, created_at, data)
			VALUES ('t1', 'i1', 'att_legacy', 'old.txt', 'text/plain', 3, '', 'p', 1, ?)`), []byte("old")); err != nil {
			t.Fatal(err)
		}
		if at, data, err := a.Get(ctx, "t1", "i1", "att_legacy"); err != nil || string(data) != "old" || at.Name != "old.txt" {
			t.Fatalf("legacy get = %+v %q %v", at, data, err)
		}

		// The key destroyed, the rows not yet deleted (an interrupted erasure).
		if err := keys.Destroy(ctx, "t1", "i1"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.Get(ctx, "t1", "i1", got[0].ID); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("get after the key's destruction: %v", err)
		}
		if list, err := a.List(ctx, "t1", "i1"); err != nil || list == nil || len(list) != 0 {
			t.Fatalf("list after the key's destruction = %+v %v, want none (no name, size or digest of a shredded file)", list, err)
		}
		if list, err := a.ListAddedBy(ctx, "t1", "i1", "p"); err != nil || len(list) != 0 {
			t.Fatalf("list by its sender after the key's destruction = %+v %v, want none", list, err)
		}
		if _, _, err := a.Get(ctx, "t1", "i1", "att_legacy"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("legacy get after the key's destruction: %v", err)
		}
		if n, err := a.Stored(ctx, "t1", "i1"); err != nil || n != 2 {
			t.Fatalf("rows left by the interrupted erasure = %d %v, want 2 (a retry deletes them)", n, err)
		}
		if _, err := a.Add(ctx, "t1", "i1", "p", []commands.NewFile{{Name: "n", ContentType: "text/plain", Data: []byte("n")}}, commands.AttachmentLimits{}); !errors.Is(err, domain.ErrErased) {
			t.Fatalf("upload to an erased inquiry: %v", err)
		}
		if err := (commands.Shredders{keys, a}).Destroy(ctx, "t1", "i1"); err != nil {
			t.Fatal(err)
		}
		if list, err := a.List(ctx, "t1", "i1"); err != nil || len(list) != 0 {
			t.Fatalf("list after erasure = %+v %v", list, err)
		}
		if _, _, err := a.Get(ctx, "t1", "i1", "att_legacy"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("legacy get after erasure: %v", err)
		}
	})
}

func TestAttachmentName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"report.pdf":              "report.pdf",
		`C:\Users\ada\report.pdf`: "report.pdf",
		"../../etc/passwd":        "passwd",
		`a"b*c:d<e>f?g|h.txt`:     "a_b_c_d_e_f_g_h.txt",
		"..hidden":                "hidden",
		"e\u0301t\u00e9.txt":      "\u00e9t\u00e9.txt",
		"evil\u202etxt.exe":       "eviltxt.exe",
		"":                        "attachment",
		"/":                       "attachment",
		"tab\there.txt":           "tab here.txt",
	} {
		if got := commands.AttachmentName(in); got != want {
			t.Errorf("AttachmentName(%q) = %q, want %q", in, got, want)
		}
	}
	long := commands.AttachmentName(string(bytes.Repeat([]byte("é"), 300)) + ".pdf")
	if n := len([]rune(long)); n != commands.MaxAttachmentName || long[len(long)-4:] != ".pdf" {
		t.Errorf("long name: %d runes, %q", n, long[len(long)-8:])
	}
}

// TestAddIntakeOnce: an intake's files are stored once. A first attempt refused by the tenant's
// quota stores nothing; the retry (the same intake, so the same inquiry and files) stores them; a
// replay, also concurrent ones, gets the same attachments back and stores nothing twice.
func TestAddIntakeOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		a, _ := newAttachments(t, db)
		files := []commands.NewFile{{Name: "a.txt", ContentType: "text/plain", Data: []byte("first")}, {Name: "b.txt", ContentType: "text/plain", Data: []byte("second")}}
		if _, err := a.AddIntake(ctx, "t1", "i1", "p", files, commands.AttachmentLimits{MaxTenantBytes: 5}); !errors.Is(err, commands.ErrAttachmentQuota) {
			t.Fatalf("over the quota: %v", err)
		}
		if list, err := a.List(ctx, "t1", "i1"); err != nil || len(list) != 0 {
			t.Fatalf("a refused attempt stored %v %v", list, err)
		}
		first, err := a.AddIntake(ctx, "t1", "i1", "p", files, commands.AttachmentLimits{})
		if err != nil || len(first) != 2 {
			t.Fatalf("retry = %v %v", first, err)
		}
		var wg sync.WaitGroup
		replays := make([][]commands.Attachment, 4)
		errs := make([]error, 4)
		for i := range replays {
			wg.Go(func() { replays[i], errs[i] = a.AddIntake(ctx, "t1", "i1", "p", files, commands.AttachmentLimits{}) })
		}
		wg.Wait()
		for i, r := range replays {
			if errs[i] != nil || len(r) != 2 || r[0].ID != first[0].ID || r[1].ID != first[1].ID || r[1].Name != "b.txt" {
				t.Fatalf("replay %d = %+v %v, first %+v", i, r, errs[i], first)
			}
		}
		if list, err := a.List(ctx, "t1", "i1"); err != nil || len(list) != 2 {
			t.Fatalf("after replays: %d attachments, %v", len(list), err)
		}
		if other, err := a.AddIntake(ctx, "t1", "i2", "p", files, commands.AttachmentLimits{}); err != nil || other[0].ID == first[0].ID {
			t.Fatalf("the same files on another inquiry = %+v %v", other, err)
		}
	})
}
