package commands_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestAttachmentStoreBackends: bytes round-trip (SQLite BLOB, Postgres BYTEA), tenant-scoped
// reads, and the per-inquiry and per-tenant limits hold under concurrent uploads, all or none.
func TestAttachmentStoreBackends(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		a, err := commands.NewAttachments(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
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
