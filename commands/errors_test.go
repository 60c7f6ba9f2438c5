package commands_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// racingStore is the real store with a competing write injected right before one append, as a
// second replica committing first would.
type racingStore struct {
	eventstore.Store
	once   sync.Once
	before func()
}

func (s *racingStore) Append(ctx context.Context, stream string, exp eventstore.ExpectedRevision, evs []eventstore.EventData,
	opts ...eventstore.AppendOption) (eventstore.AppendResult, error) {
	s.once.Do(s.before)
	return s.Store.Append(ctx, stream, exp, evs, opts...)
}

// TestLostRaceNamesVersionAndActor: a command that loses the append race answers with the
// inquiry's current version and the principal who changed it, and its error names no stream,
// tenant or store revision.
func TestLostRaceNamesVersionAndActor(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := t.Context()
	res := tb.receive(t, "k1")
	winner, loser := tb.ops[0], tb.ops[1]
	rs := &racingStore{Store: tb.store}
	rs.before = func() {
		if _, err := tb.h.Claim(ctx, commands.Claim{Target: commands.Target{Tenant: tb.tenant, InquiryID: res.InquiryID, Actor: winner}}); err != nil {
			t.Error(err)
		}
	}
	racing := *tb.h
	racing.Store = rs
	one := uint64(1)
	_, err := racing.Transition(ctx, commands.Transition{Target: commands.Target{Tenant: tb.tenant, InquiryID: res.InquiryID, Actor: loser, IfVersion: &one},
		To: domain.StatusTriaged, Priority: domain.PriorityHigh})
	var vc *domain.VersionConflictError
	if !errors.As(err, &vc) || !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("err = %v, want a *VersionConflictError", err)
	}
	if vc.Version != 3 || vc.ChangedBy != winner.ID {
		t.Fatalf("conflict = %+v, want version 3 changed by %s", vc, winner.ID)
	}
	code, status, msg := commands.Classify(err)
	if code != "version_mismatch" || status != http.StatusPreconditionFailed {
		t.Fatalf("Classify = %s %d", code, status)
	}
	for _, internal := range []string{"inquiry-", string(tb.tenant), string(res.InquiryID), "append", "revision"} {
		if strings.Contains(msg, internal) || strings.Contains(err.Error(), internal) {
			t.Errorf("conflict message %q exposes %q", msg, internal)
		}
	}
}

// TestErrorTable: every sentinel the domain defines has a code and a non-500 status, wrapped
// sentinels classify like bare ones, and anything else is internal with a fixed message.
func TestErrorTable(t *testing.T) {
	t.Parallel()
	sentinels := []error{domain.ErrNotFound, domain.ErrConcurrency, domain.ErrForbidden, domain.ErrUnauthenticated,
		domain.ErrInvalidTransition, domain.ErrValidation, domain.ErrIdempotencyMismatch, domain.ErrAlreadyClaimed,
		domain.ErrPreconditionRequired, domain.ErrConflict, domain.ErrLegalHold, domain.ErrErased, domain.ErrArchived, domain.ErrPrincipalDisabled, domain.ErrRateLimited}
	seen := map[string]bool{}
	for _, s := range sentinels {
		code, status, _ := commands.Classify(s)
		wcode, wstatus, _ := commands.Classify(errors.Join(errors.New("context"), s))
		if code == commands.Internal || status >= 500 || code != wcode || status != wstatus || seen[code] {
			t.Errorf("%v: %s %d (wrapped: %s %d)", s, code, status, wcode, wstatus)
		}
		seen[code] = true
	}
	if len(commands.ErrorCodes()) != len(sentinels)+2 { // and storage_full, internal
		t.Errorf("ErrorCodes = %v; a sentinel was added without a test row", commands.ErrorCodes())
	}
	code, status, msg := commands.Classify(errors.New(`pq: relation "inquiry-t1-x" at revision 4`))
	if code != commands.Internal || status != 500 || msg != "internal error" {
		t.Fatalf("internal error = %s %d %q", code, status, msg)
	}
	if commands.ErrorCode(nil) != "" {
		t.Fatal("ErrorCode(nil) is not empty")
	}
}

// TestStorageFullIs503: a full disk, as either database or the file system reports it, is
// storage_full, 503, with a message that says nothing was recorded; other driver errors stay
// internal.
func TestStorageFullIs503(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"Postgres disk_full":   &pgconn.PgError{Code: "53100", Message: "could not extend file"},
		"ENOSPC":               &fs.PathError{Op: "write", Path: "/data/x", Err: syscall.ENOSPC},
		"wrapped Postgres one": fmt.Errorf("append: %w", &pgconn.PgError{Code: "53100"}),
	} {
		code, status, msg := commands.Classify(err)
		if code != commands.StorageFull || status != http.StatusServiceUnavailable || !strings.Contains(msg, "nothing was recorded") {
			t.Errorf("%s: %s %d %q", name, code, status, msg)
		}
	}
	for name, err := range map[string]error{
		"Postgres out of memory (53200)": &pgconn.PgError{Code: "53200"},
		"EIO":                            &fs.PathError{Op: "write", Path: "/data/x", Err: syscall.EIO},
	} {
		if code, status, _ := commands.Classify(err); code != commands.Internal || status != http.StatusInternalServerError {
			t.Errorf("%s: %s %d, want internal", name, code, status)
		}
	}
}
