package commands

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/internal/sqldb"
)

// Attachments stores files attached to inquiries in the database of the backend (SQLite BLOBs,
// Postgres BYTEA), so a backup of the database holds them. Each file's name is sealed (AES-256-GCM)
// with the inquiry's data key (eventstore/sealed), bound to the tenant, inquiry and attachment id;
// its bytes are sealed chunks under a file key that the inquiry's data key seals (attachmentblobs.go),
// so the database holds no plaintext of them and erasure, which destroys that key, shreds them too;
// Destroy then deletes the rows and chunks. Rows stored whole before chunking (sealed = 1) are read
// as they are. Type, size and digest stay readable: they describe
// the file without being its content. Rows stored before sealing (sealed = 0) are read as they are
// and erased the same way (docs/data-lifecycle.md: read both, no rewrite).
// Attachments are records beside the log, not events; an inquiry's files are listed from this table.
type Attachments struct {
	db   *sqldb.DB
	keys *sealed.Keys
	now  func() time.Time
}

var attachmentMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS inquiry_attachments (
	tenant_id    TEXT    NOT NULL,
	inquiry_id   TEXT    NOT NULL,
	id           TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	content_type TEXT    NOT NULL,
	size         BIGINT  NOT NULL,
	sha256       TEXT    NOT NULL,
	added_by     TEXT    NOT NULL,
	created_at   BIGINT  NOT NULL,
	data         BLOB    NOT NULL,
	PRIMARY KEY (tenant_id, inquiry_id, id)
);
CREATE INDEX IF NOT EXISTS inquiry_attachments_tenant ON inquiry_attachments (tenant_id)`, Postgres: `
CREATE TABLE IF NOT EXISTS inquiry_attachments (
	tenant_id    TEXT    NOT NULL,
	inquiry_id   TEXT    NOT NULL,
	id           TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	content_type TEXT    NOT NULL,
	size         BIGINT  NOT NULL,
	sha256       TEXT    NOT NULL,
	added_by     TEXT    NOT NULL,
	created_at   BIGINT  NOT NULL,
	data         BYTEA   NOT NULL,
	PRIMARY KEY (tenant_id, inquiry_id, id)
);
CREATE INDEX IF NOT EXISTS inquiry_attachments_tenant ON inquiry_attachments (tenant_id)`}, {Version: 2, SQL: `
ALTER TABLE inquiry_attachments ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inquiry_attachments ADD COLUMN name_sealed BLOB`, Postgres: `
ALTER TABLE inquiry_attachments ADD COLUMN IF NOT EXISTS sealed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inquiry_attachments ADD COLUMN IF NOT EXISTS name_sealed BYTEA`}, {Version: 3, SQL: `
ALTER TABLE inquiry_attachments ADD COLUMN blob_id TEXT;
ALTER TABLE inquiry_attachments ADD COLUMN blob_key BLOB;
CREATE INDEX IF NOT EXISTS inquiry_attachments_blob ON inquiry_attachments (blob_id);
CREATE TABLE IF NOT EXISTS attachment_chunks (
	blob_id    TEXT    NOT NULL,
	seq        BIGINT  NOT NULL,
	tenant_id  TEXT    NOT NULL,
	created_at BIGINT  NOT NULL,
	data       BLOB    NOT NULL,
	PRIMARY KEY (blob_id, seq)
);
CREATE INDEX IF NOT EXISTS attachment_chunks_tenant ON attachment_chunks (tenant_id)`, Postgres: `
ALTER TABLE inquiry_attachments ADD COLUMN IF NOT EXISTS blob_id TEXT;
ALTER TABLE inquiry_attachments ADD COLUMN IF NOT EXISTS blob_key BYTEA;
CREATE INDEX IF NOT EXISTS inquiry_attachments_blob ON inquiry_attachments (blob_id);
CREATE TABLE IF NOT EXISTS attachment_chunks (
	blob_id    TEXT    NOT NULL,
	seq        BIGINT  NOT NULL,
	tenant_id  TEXT    NOT NULL,
	created_at BIGINT  NOT NULL,
	data       BYTEA   NOT NULL,
	PRIMARY KEY (blob_id, seq)
);
CREATE INDEX IF NOT EXISTS attachment_chunks_tenant ON attachment_chunks (tenant_id)`}}

// NewAttachments migrates the attachments table and returns the store, which seals with keys.
func NewAttachments(ctx context.Context, db *sqldb.DB, keys *sealed.Keys, now func() time.Time) (*Attachments, error) {
	if keys == nil {
		return nil, errors.New("attachments: no key store")
	}
	if err := sqldb.Migrate(ctx, db, "attachments", attachmentMigrations); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	a := &Attachments{db: db, keys: keys, now: now}
	if err := a.sweepOrphans(ctx); err != nil {
		return nil, fmt.Errorf("attachments: sweep staged chunks: %w", err)
	}
	return a, nil
}

// aad binds a sealed attachment value to its row and member.
func attachmentAAD(tenant domain.TenantID, inquiry domain.InquiryID, id, member string) []byte {
	return []byte("attachment\x00" + string(tenant) + "\x00" + string(inquiry) + "\x00" + id + "\x00" + member)
}

// key returns the inquiry's data key for reading; an erased inquiry is domain.ErrErased.
func (a *Attachments) key(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, ensure bool) (*sealed.DataKey, error) {
	var dk *sealed.DataKey
	var err error
	if ensure {
		dk, err = a.keys.Ensure(ctx, tenant, inquiry)
	} else {
		dk, err = a.keys.Get(ctx, tenant, inquiry)
	}
	if errors.Is(err, sealed.ErrErased) || err == nil && dk == nil {
		return nil, fmt.Errorf("attachment: %w", domain.ErrErased)
	}
	return dk, err
}

// Destroy deletes every attachment of an inquiry (erasure: commands.Shredder). Their sealed bytes
// were unreadable once the data key was destroyed; deleting the rows leaves not even ciphertext in
// the live tables (SQLite zeroes freed pages, secure_delete). Deleting twice is harmless.
// Their chunks go in the same transaction.
func (a *Attachments) Destroy(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID) error {
	err := sqldb.InTx(ctx, a.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, a.db.Rebind(`DELETE FROM attachment_chunks WHERE blob_id IN
			(SELECT blob_id FROM inquiry_attachments WHERE tenant_id = ? AND inquiry_id = ? AND blob_id IS NOT NULL)`), tenant, inquiry); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, a.db.Rebind(`DELETE FROM inquiry_attachments WHERE tenant_id = ? AND inquiry_id = ?`), tenant, inquiry)
		return err
	})
	if err != nil {
		return fmt.Errorf("erase attachments: %w", err)
	}
	return nil
}

// Stored counts an inquiry's attachment rows, readable or not (an erasure's completion checks
// that none is left).
func (a *Attachments) Stored(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID) (int, error) {
	var n int
	err := a.db.QueryRowContext(ctx, a.db.Rebind(`SELECT count(*) FROM inquiry_attachments WHERE tenant_id = ? AND inquiry_id = ?`), tenant, inquiry).Scan(&n)
	return n, err
}

// AttachmentLimits bound attachments; zero fields take the defaults.
type AttachmentLimits struct {
	MaxFileBytes   int64 // per file (default 10 MB)
	MaxFiles       int   // per inquiry (default 10)
	MaxTenantBytes int64 // all attachments of a tenant (default 5 GB)
}

// WithDefaults fills zero limits.
func (l AttachmentLimits) WithDefaults() AttachmentLimits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 10 << 20
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = 10
	}
	if l.MaxTenantBytes <= 0 {
		l.MaxTenantBytes = 5 << 30
	}
	return l
}

// ErrAttachmentQuota: the tenant's attachments would exceed MaxTenantBytes.
var ErrAttachmentQuota = errors.New("the tenant's attachment storage is full")

// Attachment describes a stored file (without its bytes).
type Attachment struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	CreatedAt   time.Time `json:"created_at"`
}

// NewFile is a file to attach: its normalized name, sniffed type and bytes.
type NewFile struct {
	Name, ContentType string
	Data              []byte
}

// Add stores files on an inquiry of tenant, all or none: more than MaxFiles on the inquiry is a
// validation error (422), more than MaxTenantBytes for the tenant ErrAttachmentQuota. The caller
// has checked that the inquiry exists and that actor may attach to it.
func (a *Attachments) Add(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []NewFile, lim AttachmentLimits) ([]Attachment, error) {
	staged, err := a.stageAll(ctx, tenant, files, lim)
	if err != nil {
		return nil, err
	}
	return a.Commit(ctx, tenant, inquiry, actor, staged, lim)
}

// stageAll stages files held in memory (callers with small files; HTTP uploads stream to Stage).
func (a *Attachments) stageAll(ctx context.Context, tenant domain.TenantID, files []NewFile, lim AttachmentLimits) ([]StagedFile, error) {
	lim = lim.WithDefaults()
	staged := make([]StagedFile, 0, len(files))
	for _, f := range files {
		sf, err := a.Stage(ctx, tenant, f.Name, f.ContentType, bytes.NewReader(f.Data), lim.MaxFileBytes)
		if err != nil {
			a.Discard(context.WithoutCancel(ctx), staged...)
			return nil, err
		}
		staged = append(staged, sf)
	}
	return staged, nil
}

// Commit makes staged files attachments of an inquiry of tenant, all or none, as Add; whatever is
// not committed (an error, a limit) is discarded.
func (a *Attachments) Commit(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []StagedFile, lim AttachmentLimits) ([]Attachment, error) {
	defer a.Discard(context.WithoutCancel(ctx), files...)
	return a.add(ctx, tenant, inquiry, actor, files, lim, nil)
}

// FileDigests names files for an intake's idempotency fingerprint (Intake.Files): each one's name
// and SHA-256, in order.
func FileDigests(files []NewFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		sum := sha256.Sum256(f.Data)
		out[i] = f.Name + "\x00" + hex.EncodeToString(sum[:])
	}
	return out
}

// AddIntake stores the files submitted with an intake, once: their ids derive from the inquiry, the
// position and the digest of each file, so a replayed intake (the same Idempotency-Key and body,
// hence the same inquiry) finds them stored and gets them back, and an intake whose attachments
// failed after its inquiry was recorded stores them when it is retried. Otherwise as Add.
func (a *Attachments) AddIntake(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []NewFile, lim AttachmentLimits) ([]Attachment, error) {
	staged, err := a.stageAll(ctx, tenant, files, lim)
	if err != nil {
		return nil, err
	}
	return a.CommitIntake(ctx, tenant, inquiry, actor, staged, lim)
}

// CommitIntake is AddIntake for staged files (their digests are StagedDigests); a replay's staged
// copies are discarded.
func (a *Attachments) CommitIntake(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []StagedFile, lim AttachmentLimits) ([]Attachment, error) {
	defer a.Discard(context.WithoutCancel(ctx), files...)
	ids := make([]string, len(files))
	for i, d := range StagedDigests(files) {
		sum := sha256.Sum256([]byte(fmt.Sprintf("intake\x00%s\x00%s\x00%d\x00%s", tenant, inquiry, i, d)))
		ids[i] = "att_" + hex.EncodeToString(sum[:10])
	}
	return a.add(ctx, tenant, inquiry, actor, files, lim, ids)
}

// CheckQuota reports ErrAttachmentQuota when adding bytes would pass the tenant's limit now. It
// stores nothing; Add checks again in its transaction.
func (a *Attachments) CheckQuota(ctx context.Context, tenant domain.TenantID, bytes int64, lim AttachmentLimits) error {
	lim = lim.WithDefaults()
	var used sql.NullInt64
	if err := a.db.QueryRowContext(ctx, a.db.Rebind(`SELECT sum(size) FROM inquiry_attachments WHERE tenant_id = ?`), tenant).Scan(&used); err != nil {
		return err
	}
	if used.Int64+bytes > lim.MaxTenantBytes {
		return ErrAttachmentQuota
	}
	return nil
}

// add stores files with ids (random when nil). When every one of ids is stored already, it returns
// those instead (a replay).
func (a *Attachments) add(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID, files []StagedFile, lim AttachmentLimits, ids []string) ([]Attachment, error) {
	lim = lim.WithDefaults()
	var added int64
	for _, f := range files {
		if f.blob == "" {
			return nil, errors.New("attachments: a file that was not staged")
		}
		added += f.Size
	}
	now := a.now().UTC()
	dk, err := a.key(ctx, tenant, inquiry, true)
	if err != nil {
		return nil, err
	}
	var out []Attachment
	replay := false
	err = sqldb.InTx(ctx, a.db, func(tx *sql.Tx) error {
		if a.db.Dialect == sqldb.Postgres {
			// One writer per tenant at a time, so concurrent uploads cannot pass the limits together.
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext('attachments:' || $1))`, string(tenant)); err != nil {
				return err
			}
		}
		if ids != nil {
			var stored int
			if err := tx.QueryRowContext(ctx, a.db.Rebind(`SELECT count(*) FROM inquiry_attachments WHERE tenant_id = ? AND inquiry_id = ? AND id = ?`),
				tenant, inquiry, ids[0]).Scan(&stored); err != nil {
				return err
			}
			if stored > 0 {
				replay = true
				return nil
			}
		}
		var n int
		if err := tx.QueryRowContext(ctx, a.db.Rebind(`SELECT count(*) FROM inquiry_attachments WHERE tenant_id = ? AND inquiry_id = ?`),
			tenant, inquiry).Scan(&n); err != nil {
			return err
		}
		if n+len(files) > lim.MaxFiles {
			return domain.Invalid("file", "an inquiry has at most %d attachments (%d already)", lim.MaxFiles, n)
		}
		var used sql.NullInt64
		if err := tx.QueryRowContext(ctx, a.db.Rebind(`SELECT sum(size) FROM inquiry_attachments WHERE tenant_id = ?`), tenant).Scan(&used); err != nil {
			return err
		}
		if used.Int64+added > lim.MaxTenantBytes {
			return ErrAttachmentQuota
		}
		for i, f := range files {
			var rnd [10]byte
			_, _ = rand.Read(rnd[:])
			id := "att_" + hex.EncodeToString(rnd[:])
			if ids != nil {
				id = ids[i]
			}
			at := Attachment{ID: id, Name: f.Name, ContentType: f.ContentType,
				Size: f.Size, SHA256: f.SHA256, CreatedAt: now.Add(time.Duration(i))} // keeps the request's order
			if _, err := tx.ExecContext(ctx, a.db.Rebind(`INSERT INTO inquiry_attachments
				(tenant_id, inquiry_id, id, name, name_sealed, sealed, content_type, size, sha256, added_by, created_at, data, blob_id, blob_key)
				VALUES (?, ?, ?, '', ?, 2, ?, ?, ?, ?, ?, ?, ?, ?)`),
				tenant, inquiry, at.ID, dk.Seal([]byte(at.Name), attachmentAAD(tenant, inquiry, at.ID, "name")), at.ContentType, at.Size, at.SHA256,
				actor, at.CreatedAt.UnixNano(), []byte{}, f.blob, dk.Seal(f.key, attachmentAAD(tenant, inquiry, at.ID, "key\x00"+f.blob))); err != nil {
				return err
			}
			out = append(out, at)
		}
		return nil
	})
	if err != nil || !replay {
		return out, err
	}
	all, err := a.List(ctx, tenant, inquiry)
	if err != nil {
		return nil, err
	}
	byID := map[string]Attachment{}
	for _, at := range all {
		byID[at.ID] = at
	}
	for _, id := range ids {
		at, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("attachments of %s: a replayed intake's file %s is missing", inquiry, id)
		}
		out = append(out, at)
	}
	return out, nil
}

// List describes an inquiry's attachments, oldest first.
func (a *Attachments) List(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID) ([]Attachment, error) {
	return a.list(ctx, tenant, inquiry, "")
}

// ListAddedBy describes the attachments of an inquiry that actor added, oldest first (what a
// portal's requester sent).
func (a *Attachments) ListAddedBy(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, actor domain.PrincipalID) ([]Attachment, error) {
	if actor == "" {
		return []Attachment{}, nil
	}
	return a.list(ctx, tenant, inquiry, actor)
}

func (a *Attachments) list(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, by domain.PrincipalID) ([]Attachment, error) {
	rows, err := a.db.QueryContext(ctx, a.db.Rebind(`SELECT id, name, name_sealed, sealed, content_type, size, sha256, created_at FROM inquiry_attachments
		WHERE tenant_id = ? AND inquiry_id = ? AND (? = '' OR added_by = ?) ORDER BY created_at, id`), tenant, inquiry, by, by)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := []Attachment{}
	var sealedNames [][]byte
	for rows.Next() {
		var at Attachment
		var created int64
		var sealedName []byte
		var isSealed int
		if err := rows.Scan(&at.ID, &at.Name, &sealedName, &isSealed, &at.ContentType, &at.Size, &at.SHA256, &created); err != nil {
			return nil, err
		}
		at.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, at)
		if isSealed == 0 {
			sealedName = nil
		}
		sealedNames = append(sealedNames, sealedName)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	// An erased inquiry has no attachments, also while rows its erasure has not deleted yet (an
	// interrupted erasure) are left: not even their size or digest is listed.
	dk, err := a.keys.Get(ctx, tenant, inquiry)
	switch {
	case errors.Is(err, sealed.ErrErased):
		return []Attachment{}, nil
	case err != nil:
		return nil, err
	}
	for i, sn := range sealedNames {
		if sn == nil {
			continue
		}
		if dk == nil {
			return nil, fmt.Errorf("attachment %s: sealed, but the inquiry has no data key", out[i].ID)
		}
		name, err := dk.Open(sn, attachmentAAD(tenant, inquiry, out[i].ID, "name"))
		if err != nil {
			return nil, fmt.Errorf("attachment %s: name: %w", out[i].ID, err)
		}
		out[i].Name = string(name)
	}
	return out, nil
}

// Get returns one attachment with its bytes (Open, read whole: for small files and tests).
func (a *Attachments) Get(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, id string) (Attachment, []byte, error) {
	at, r, err := a.Open(ctx, tenant, inquiry, id)
	if err != nil {
		return Attachment{}, nil, err
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(r)
	if err != nil {
		return Attachment{}, nil, fmt.Errorf("attachment %s: %w", at.ID, err)
	}
	return at, data, nil
}

// Open returns one attachment and a reader of its bytes, opened with the inquiry's data key chunk
// by chunk as it is read (ErrChunkTampered for a truncated or altered blob); another tenant's or
// inquiry's, or an erased one, is domain.ErrNotFound.
func (a *Attachments) Open(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, id string) (Attachment, io.ReadCloser, error) {
	var at Attachment
	var created int64
	var data, sealedName, blobKey []byte
	var blob sql.NullString
	var isSealed int
	err := a.db.QueryRowContext(ctx, a.db.Rebind(`SELECT id, name, name_sealed, sealed, content_type, size, sha256, created_at, data, blob_id, blob_key FROM inquiry_attachments
		WHERE tenant_id = ? AND inquiry_id = ? AND id = ?`), tenant, inquiry, id).
		Scan(&at.ID, &at.Name, &sealedName, &isSealed, &at.ContentType, &at.Size, &at.SHA256, &created, &data, &blob, &blobKey)
	if errors.Is(err, sql.ErrNoRows) {
		return Attachment{}, nil, fmt.Errorf("attachment: %w", domain.ErrNotFound)
	}
	if err != nil {
		return Attachment{}, nil, err
	}
	at.CreatedAt = time.Unix(0, created).UTC()
	dk, err := a.keys.Get(ctx, tenant, inquiry)
	switch {
	case errors.Is(err, sealed.ErrErased):
		// Erased (interrupted before its rows were deleted): an unsealed row too is gone.
		return Attachment{}, nil, fmt.Errorf("attachment: %w", domain.ErrNotFound)
	case err != nil:
		return Attachment{}, nil, err
	case isSealed == 0:
		return at, io.NopCloser(bytes.NewReader(data)), nil
	case dk == nil:
		return Attachment{}, nil, fmt.Errorf("attachment %s: sealed, but the inquiry has no data key", at.ID)
	}
	name, err := dk.Open(sealedName, attachmentAAD(tenant, inquiry, at.ID, "name"))
	if err != nil {
		return Attachment{}, nil, fmt.Errorf("attachment %s: name: %w", at.ID, err)
	}
	at.Name = string(name)
	if isSealed == 1 {
		if data, err = dk.Open(data, attachmentAAD(tenant, inquiry, at.ID, "data")); err != nil {
			return Attachment{}, nil, fmt.Errorf("attachment %s: %w", at.ID, err)
		}
		return at, io.NopCloser(bytes.NewReader(data)), nil
	}
	key, err := dk.Open(blobKey, attachmentAAD(tenant, inquiry, at.ID, "key\x00"+blob.String))
	if err != nil {
		return Attachment{}, nil, fmt.Errorf("attachment %s: key: %w", at.ID, err)
	}
	aead, err := chunkAEAD(key)
	if err != nil {
		return Attachment{}, nil, err
	}
	return at, &chunkReader{ctx: ctx, a: a, blob: blob.String, aead: aead}, nil
}

// MaxAttachmentName bounds a file name, in characters.
const MaxAttachmentName = 200

// AttachmentName normalizes a client's file name: the last path element only (either slash),
// NFC, control, format and bidi characters removed, characters that mean something to file
// systems or headers (" * / : < > ? \ |) replaced by _, white space collapsed, no leading dots,
// at most MaxAttachmentName characters (the extension kept). Empty is "attachment".
func AttachmentName(name string) string {
	name = strings.ReplaceAll(name, `\`, "/")
	if name = path.Base("/" + name); name == "/" {
		name = ""
	}
	name = Normalize(name, false)
	name = strings.Map(func(r rune) rune {
		switch {
		case strings.ContainsRune(`"*/:<>?\|`, r):
			return '_'
		case unicode.IsSpace(r):
			return ' '
		}
		return r
	}, name)
	name = strings.TrimLeft(strings.Join(strings.Fields(name), " "), ". ")
	if utf8.RuneCountInString(name) > MaxAttachmentName {
		ext := path.Ext(name)
		if utf8.RuneCountInString(ext) > 16 {
			ext = ""
		}
		name = domain.CutRunes(strings.TrimSuffix(name, ext), MaxAttachmentName-utf8.RuneCountInString(ext)) + ext
	}
	if name == "" {
		return "attachment"
	}
	return name
}
