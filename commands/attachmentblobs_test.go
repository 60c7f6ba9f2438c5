package commands_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// fileOf returns n pseudo-random bytes (incompressible, so no chunk is all zeros).
func fileOf(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestAttachmentChunksTamperDetected: a file of several chunks reads back whole; a dropped last
// chunk (truncation), two chunks swapped, a flipped bit, a chunk appended after the last, and a
// chunk moved from another file are each ErrChunkTampered on read. On SQLite and Postgres.
func TestAttachmentChunksTamperDetected(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		a, _ := newAttachments(t, db)
		size := 2*commands.AttachmentChunkSize + 1234
		cases := []struct {
			name   string
			tamper string
		}{
			{"intact", ""},
			{"last chunk dropped", `DELETE FROM attachment_chunks WHERE blob_id = ? AND seq = 2`},
			{"chunks swapped", `UPDATE attachment_chunks SET seq = ? WHERE blob_id = ? AND seq = ?`},
			{"bit flipped", `UPDATE attachment_chunks SET data = ? WHERE blob_id = ? AND seq = 1`},
			{"chunk appended", `INSERT INTO attachment_chunks (blob_id, seq, tenant_id, created_at, data) SELECT blob_id, 3, tenant_id, created_at, data FROM attachment_chunks WHERE blob_id = ? AND seq = 0`},
			{"chunk from another file", `UPDATE attachment_chunks SET data = ? WHERE blob_id = ? AND seq = 0`},
		}
		other := fileOf(size, 99)
		otherAt, err := a.Add(ctx, "t1", "i0", "p", []commands.NewFile{{Name: "o.bin", ContentType: "image/png", Data: other}}, commands.AttachmentLimits{})
		if err != nil {
			t.Fatal(err)
		}
		otherBlob := blobOf(t, db, otherAt[0].ID)
		for i, c := range cases {
			data := fileOf(size, uint64(i))
			got, err := a.Add(ctx, "t1", "i1", "p", []commands.NewFile{{Name: "f.bin", ContentType: "image/png", Data: data}}, commands.AttachmentLimits{})
			if err != nil {
				t.Fatal(err)
			}
			blob := blobOf(t, db, got[0].ID)
			var n int
			if err := db.QueryRowContext(ctx, db.Rebind(`SELECT count(*) FROM attachment_chunks WHERE blob_id = ?`), blob).Scan(&n); err != nil || n != 3 {
				t.Fatalf("%s: %d chunks, %v", c.name, n, err)
			}
			switch c.name {
			case "bit flipped":
				var sealed []byte
				if err := db.QueryRowContext(ctx, db.Rebind(`SELECT data FROM attachment_chunks WHERE blob_id = ? AND seq = 1`), blob).Scan(&sealed); err != nil {
					t.Fatal(err)
				}
				sealed[100] ^= 1
				mustExec(t, db, c.tamper, sealed, blob)
			case "chunk from another file":
				var sealed []byte
				if err := db.QueryRowContext(ctx, db.Rebind(`SELECT data FROM attachment_chunks WHERE blob_id = ? AND seq = 0`), otherBlob).Scan(&sealed); err != nil {
					t.Fatal(err)
				}
				mustExec(t, db, c.tamper, sealed, blob)
			case "chunks swapped":
				mustExec(t, db, c.tamper, -1, blob, 0)
				mustExec(t, db, c.tamper, 0, blob, 1)
				mustExec(t, db, c.tamper, 1, blob, -1)
			case "intact":
			default:
				mustExec(t, db, c.tamper, blob)
			}
			_, read, err := a.Get(ctx, "t1", "i1", got[0].ID)
			if c.tamper == "" {
				if err != nil || !bytes.Equal(read, data) {
					t.Fatalf("intact: %d bytes, %v", len(read), err)
				}
				continue
			}
			if !errors.Is(err, commands.ErrChunkTampered) {
				t.Errorf("%s: read = %d bytes, %v; want ErrChunkTampered", c.name, len(read), err)
			}
		}
	})
}

func blobOf(t *testing.T, db *sqldb.DB, id string) string {
	t.Helper()
	var blob string
	if err := db.QueryRowContext(t.Context(), db.Rebind(`SELECT blob_id FROM inquiry_attachments WHERE id = ?`), id).Scan(&blob); err != nil {
		t.Fatal(err)
	}
	return blob
}

func mustExec(t *testing.T, db *sqldb.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), db.Rebind(q), args...); err != nil {
		t.Fatal(err)
	}
}

// TestAttachmentStageRefusesAndCleansUp: a file over its limit is ErrFileTooLarge with none of its
// chunks kept; staged files that are discarded, or whose commit is refused, leave no chunk; a
// committed file's chunks hold no plaintext.
func TestAttachmentStageRefusesAndCleansUp(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		a, _ := newAttachments(t, db)
		big := fileOf(commands.AttachmentChunkSize+10, 1)
		if _, err := a.Stage(ctx, "t1", "big.png", "image/png", bytes.NewReader(big), int64(len(big)-1)); !errors.Is(err, commands.ErrFileTooLarge) {
			t.Fatalf("over the limit: %v", err)
		}
		if n, err := a.Chunks(ctx, "t1"); err != nil || n != 0 {
			t.Fatalf("after a refused file: %d chunks, %v", n, err)
		}
		ok, err := a.Stage(ctx, "t1", "ok.png", "image/png", bytes.NewReader(big), int64(len(big)))
		if err != nil || ok.Size != int64(len(big)) {
			t.Fatalf("stage = %+v, %v", ok, err)
		}
		a.Discard(ctx, ok)
		if n, err := a.Chunks(ctx, "t1"); err != nil || n != 0 {
			t.Fatalf("after discard: %d chunks, %v", n, err)
		}
		// A commit over the tenant's quota stores no row and keeps no chunk.
		f, err := a.Stage(ctx, "t1", "q.txt", "text/plain", bytes.NewReader([]byte("Plain-Marigold-4410")), 100)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Commit(ctx, "t1", "i1", "p", []commands.StagedFile{f}, commands.AttachmentLimits{MaxTenantBytes: 5}); !errors.Is(err, commands.ErrAttachmentQuota) {
			t.Fatalf("over quota: %v", err)
		}
		if n, err := a.Chunks(ctx, "t1"); err != nil || n != 0 {
			t.Fatalf("after a refused commit: %d chunks, %v", n, err)
		}
		f, _ = a.Stage(ctx, "t1", "q.txt", "text/plain", bytes.NewReader([]byte("Plain-Marigold-4410")), 100)
		if _, err := a.Commit(ctx, "t1", "i1", "p", []commands.StagedFile{f}, commands.AttachmentLimits{}); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM attachment_chunks`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("committed: %d chunks, %v", n, err)
		}
		var sealed []byte
		if err := db.QueryRowContext(ctx, `SELECT data FROM attachment_chunks`).Scan(&sealed); err != nil || bytes.Contains(sealed, []byte("Marigold")) {
			t.Fatalf("a chunk holds plaintext or cannot be read: %q %v", sealed, err)
		}
	})
}

// TestAttachmentErasureLeavesNoChunk: erasing an inquiry (its key destroyed, then Destroy) leaves
// none of its attachments' chunks, readable or not; another inquiry's stay readable.
func TestAttachmentErasureLeavesNoChunk(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		a, keys := newAttachments(t, db)
		data := fileOf(commands.AttachmentChunkSize+5, 3)
		gone, err := a.Add(ctx, "t1", "i1", "p", []commands.NewFile{{Name: "a.png", ContentType: "image/png", Data: data}, {Name: "b.png", ContentType: "image/png", Data: data}}, commands.AttachmentLimits{})
		if err != nil {
			t.Fatal(err)
		}
		kept, err := a.Add(ctx, "t1", "i2", "p", []commands.NewFile{{Name: "c.png", ContentType: "image/png", Data: data}}, commands.AttachmentLimits{})
		if err != nil {
			t.Fatal(err)
		}
		blobs := []any{blobOf(t, db, gone[0].ID), blobOf(t, db, gone[1].ID)}
		if err := keys.Destroy(ctx, "t1", "i1"); err != nil {
			t.Fatal(err)
		}
		// The key gone, the chunks not yet deleted: already unreadable.
		if _, _, err := a.Get(ctx, "t1", "i1", gone[0].ID); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("read after the key's destruction: %v", err)
		}
		if err := (commands.Shredders{keys, a}).Destroy(ctx, "t1", "i1"); err != nil {
			t.Fatal(err)
		}
		var left int
		if err := db.QueryRowContext(ctx, db.Rebind(`SELECT count(*) FROM attachment_chunks WHERE blob_id IN (?, ?)`), blobs...).Scan(&left); err != nil || left != 0 {
			t.Fatalf("after erasure: %d chunks of the erased files, %v", left, err)
		}
		if n, err := a.Chunks(ctx, "t1"); err != nil || n != 2 {
			t.Fatalf("after erasure: %d chunks of the tenant, %v; want the other inquiry's 2", n, err)
		}
		if _, got, err := a.Get(ctx, "t1", "i2", kept[0].ID); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the other inquiry's file: %d bytes, %v", len(got), err)
		}
	})
}
