package commands

import (
	"bufio"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/casebook/casebook/domain"
)

// A file's bytes are stored as a blob of sealed chunks (table attachment_chunks), written while
// the upload streams in, so no file is ever held whole in memory:
//
//   - each blob has its own random 256-bit file key; the attachment's row holds that key sealed
//     with the inquiry's data key (bound to the tenant, inquiry, attachment and blob), so the
//     inquiry's key governs every chunk and erasure, which destroys it, shreds them all;
//   - the bytes are cut into AttachmentChunkSize chunks, chunk i sealed with AES-256-GCM under the
//     file key with the nonce i (8 bytes, big-endian) || 0 0 0 || final (1 for the last chunk,
//     else 0) and the blob id as additional data. A key seals one blob only, so the counter nonces
//     never repeat; a reordered, replaced or truncated chunk, a dropped last chunk or one appended
//     after it fails to open.
//
// A blob is staged (Stage) before anything is recorded and becomes an attachment when a row
// referencing it commits (Commit); Discard deletes a staged blob that no row references, and
// NewAttachments sweeps such orphans left by a crash (unreadable anyway: their keys were only
// ever in the crashed process's memory).

// AttachmentChunkSize is the plaintext size of a sealed chunk: large enough that a 100 MB file is
// 100 rows, small enough that concurrent uploads hold a few MiB each.
const AttachmentChunkSize = 1 << 20

// orphanChunkAge is how old an unreferenced blob must be before NewAttachments deletes it: longer
// than any upload takes between its first chunk and its commit.
const orphanChunkAge = 24 * time.Hour

// ErrFileTooLarge: a staged file exceeds its limit; nothing of it is kept.
var ErrFileTooLarge = errors.New("the file exceeds the size limit")

// ErrChunkTampered: a stored blob's chunks do not open in order to a final chunk.
var ErrChunkTampered = errors.New("attachment: stored chunks are missing, reordered or tampered with")

// StagedFile is a file streamed into sealed chunks, not yet an attachment (Commit, Discard).
type StagedFile struct {
	Name, ContentType string
	Size              int64
	SHA256            string
	blob              string
	key               []byte
}

// Digest names the file for an intake's idempotency fingerprint, as FileDigests does.
func (f StagedFile) Digest() string { return f.Name + "\x00" + f.SHA256 }

// StagedDigests is FileDigests for staged files.
func StagedDigests(files []StagedFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Digest()
	}
	return out
}

func chunkAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func chunkNonce(seq int64, final bool) []byte {
	n := make([]byte, 12)
	binary.BigEndian.PutUint64(n, uint64(seq))
	if final {
		n[11] = 1
	}
	return n
}

func chunkAAD(blob string) []byte { return []byte("attachment-chunk\x00" + blob) }

// Stage streams r (at most maxBytes, else ErrFileTooLarge) into a new blob of sealed chunks for
// tenant, one chunk in memory at a time. On any error nothing of it is kept.
func (a *Attachments) Stage(ctx context.Context, tenant domain.TenantID, name, contentType string, r io.Reader, maxBytes int64) (StagedFile, error) {
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	f := StagedFile{Name: name, ContentType: contentType, blob: "blob_" + hex.EncodeToString(rnd[:]), key: make([]byte, 32)}
	_, _ = rand.Read(f.key)
	err := a.writeChunks(ctx, tenant, &f, r, maxBytes)
	if err != nil {
		a.Discard(context.WithoutCancel(ctx), f)
		return StagedFile{}, err
	}
	return f, nil
}

func (a *Attachments) writeChunks(ctx context.Context, tenant domain.TenantID, f *StagedFile, r io.Reader, maxBytes int64) error {
	aead, err := chunkAEAD(f.key)
	if err != nil {
		return err
	}
	sum := sha256.New()
	br := bufio.NewReaderSize(io.LimitReader(r, maxBytes+1), 4096)
	buf := make([]byte, AttachmentChunkSize)
	out := make([]byte, 0, AttachmentChunkSize+aead.Overhead())
	now := a.now().UnixNano()
	aad := chunkAAD(f.blob)
	insert := a.db.Rebind(`INSERT INTO attachment_chunks (blob_id, seq, tenant_id, created_at, data) VALUES (?, ?, ?, ?, ?)`)
	for seq := int64(0); ; seq++ {
		n, err := io.ReadFull(br, buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("attachment upload: %w", err)
		}
		final := n < len(buf)
		if !final {
			if _, perr := br.Peek(1); errors.Is(perr, io.EOF) {
				final = true
			} else if perr != nil {
				return fmt.Errorf("attachment upload: %w", perr)
			}
		}
		f.Size += int64(n)
		if f.Size > maxBytes {
			return ErrFileTooLarge
		}
		sum.Write(buf[:n])
		out = aead.Seal(out[:0], chunkNonce(seq, final), buf[:n], aad)
		if _, err := a.db.ExecContext(ctx, insert, f.blob, seq, tenant, now, out); err != nil {
			return fmt.Errorf("attachment chunk: %w", err)
		}
		if final {
			f.SHA256 = hex.EncodeToString(sum.Sum(nil))
			return nil
		}
	}
}

// Discard deletes staged blobs that no attachment references (a committed one is left alone, so
// discarding after a commit whose outcome is unknown is safe). Errors are logged by the sweep's
// absence only: a leftover blob is unreadable and NewAttachments deletes it later.
func (a *Attachments) Discard(ctx context.Context, files ...StagedFile) {
	for _, f := range files {
		if f.blob == "" {
			continue
		}
		_, _ = a.db.ExecContext(ctx, a.db.Rebind(`DELETE FROM attachment_chunks WHERE blob_id = ?
			AND NOT EXISTS (SELECT 1 FROM inquiry_attachments WHERE blob_id = ?)`), f.blob, f.blob)
	}
}

// sweepOrphans deletes blobs older than orphanChunkAge that no attachment references.
func (a *Attachments) sweepOrphans(ctx context.Context) error {
	_, err := a.db.ExecContext(ctx, a.db.Rebind(`DELETE FROM attachment_chunks WHERE created_at < ?
		AND blob_id NOT IN (SELECT blob_id FROM inquiry_attachments WHERE blob_id IS NOT NULL)`), a.now().Add(-orphanChunkAge).UnixNano())
	return err
}

// Chunks counts a tenant's stored chunks, staged or committed (after an erasure and a failed
// upload the count shows that none was left behind).
func (a *Attachments) Chunks(ctx context.Context, tenant domain.TenantID) (int, error) {
	var n int
	err := a.db.QueryRowContext(ctx, a.db.Rebind(`SELECT count(*) FROM attachment_chunks WHERE tenant_id = ?`), tenant).Scan(&n)
	return n, err
}

// chunkReader reads a blob chunk by chunk, one query per chunk, so a download holds one chunk.
type chunkReader struct {
	ctx   context.Context
	a     *Attachments
	blob  string
	aead  cipher.AEAD
	seq   int64
	buf   []byte // the unread rest of plain
	plain []byte
	done  bool
	err   error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if c.done {
			return 0, io.EOF
		}
		c.err = c.next()
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

func (c *chunkReader) next() error {
	var sealedChunk []byte
	err := c.a.db.QueryRowContext(c.ctx, c.a.db.Rebind(`SELECT data FROM attachment_chunks WHERE blob_id = ? AND seq = ?`), c.blob, c.seq).Scan(&sealedChunk)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrChunkTampered // the final chunk was never reached: truncated
	}
	if err != nil {
		return err
	}
	aad := chunkAAD(c.blob)
	// Not in place: a failed Open clears its output, and the final-chunk nonce is tried second.
	plain, err := c.aead.Open(c.plain[:0], chunkNonce(c.seq, false), sealedChunk, aad)
	if err != nil {
		if plain, err = c.aead.Open(c.plain[:0], chunkNonce(c.seq, true), sealedChunk, aad); err != nil {
			return ErrChunkTampered
		}
		var more int
		if err := c.a.db.QueryRowContext(c.ctx, c.a.db.Rebind(`SELECT count(*) FROM attachment_chunks WHERE blob_id = ? AND seq > ?`), c.blob, c.seq).Scan(&more); err != nil {
			return err
		}
		if more > 0 {
			return ErrChunkTampered
		}
		c.done = true
	}
	c.seq++
	c.plain, c.buf = plain, plain
	return nil
}

func (c *chunkReader) Close() error { return nil }
