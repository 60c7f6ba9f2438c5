// Package queries reads the query model for the query API and dashboards. Every query is scoped to
// one tenant: an id of another tenant finds nothing, exactly like an unknown id.
package queries

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// Inquiry is the list and detail view of an inquiry.
type Inquiry struct {
	ID        domain.InquiryID   `json:"id"`
	Receipt   string             `json:"receipt"`
	Version   uint64             `json:"version"`
	Status    domain.Status      `json:"status"`
	Priority  domain.Priority    `json:"priority"`
	Owner     domain.PrincipalID `json:"owner"`
	Team      string             `json:"team"`
	Source    domain.Source      `json:"source"`
	Category  string             `json:"category"`
	Subject   string             `json:"subject"`
	Message   string             `json:"message,omitempty"`
	Requester *domain.Requester  `json:"requester,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	UpdatedAt time.Time          `json:"updated_at"`
	ClosedAt  *time.Time         `json:"closed_at,omitempty"`
	// The data lifecycle: archived inquiries leave the default list; an erased one reads
	// domain.Erased in its personal fields.
	Archived    bool       `json:"archived"`
	Held        bool       `json:"legal_hold"`
	Erased      bool       `json:"erased"`
	RetainUntil *time.Time `json:"retain_until,omitempty"`
}

// TimelineEntry is one event of an inquiry's audit trail.
type TimelineEntry struct {
	Version    uint64             `json:"version"`
	Type       string             `json:"type"`
	Actor      domain.PrincipalID `json:"actor"`
	OccurredAt time.Time          `json:"occurred_at"`
	Data       json.RawMessage    `json:"data"`
	// CommandID names the command that appended the event; the events of one command share it.
	CommandID string `json:"command_id,omitempty"`
}

// Filter selects inquiries. Zero fields do not filter. Limit is 1..MaxLimit (DefaultLimit when 0).
// Receipt matches exactly; Subject matches a case-insensitive substring of the subject.
type Filter struct {
	Status   domain.Status
	Owner    domain.PrincipalID
	Priority domain.Priority
	Team     string
	Receipt  string
	Subject  string
	// Breached selects inquiries with (true) or without (false) a breached SLA target.
	Breached *bool
	// DueBefore selects inquiries promised before it: a due date or a running SLA due time.
	DueBefore time.Time
	// Archived selects archived inquiries (true) or the working set (false, the default when nil).
	Archived *bool
	Limit    int
	Cursor   string
}

// Page limits.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// Reader runs queries.
type Reader struct {
	DB *sqldb.DB
}

const columns = `id, receipt, version, status, priority, owner, team, source, category, subject, message,
	requester_name, requester_email, created_at, updated_at, closed_at, archived, held, erased, retain_until`

func scanInquiry(row interface{ Scan(...any) error }, detail bool) (Inquiry, error) {
	var q Inquiry
	var msg, name, email string
	var created, updated int64
	var closed, until sql.NullInt64
	var archived, held, erased int64
	if err := row.Scan(&q.ID, &q.Receipt, &q.Version, &q.Status, &q.Priority, &q.Owner, &q.Team, &q.Source, &q.Category,
		&q.Subject, &msg, &name, &email, &created, &updated, &closed, &archived, &held, &erased, &until); err != nil {
		return Inquiry{}, err
	}
	q.Archived, q.Held, q.Erased = archived != 0, held != 0, erased != 0
	if until.Valid {
		t := time.Unix(0, until.Int64).UTC()
		q.RetainUntil = &t
	}
	q.CreatedAt, q.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	if closed.Valid {
		t := time.Unix(0, closed.Int64).UTC()
		q.ClosedAt = &t
	}
	if detail {
		q.Message, q.Requester = msg, &domain.Requester{Name: name, Email: email}
	}
	return q, nil
}

// Get returns one inquiry with its personal fields; domain.ErrNotFound if the tenant has no such id.
func (r *Reader) Get(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (Inquiry, error) {
	row := r.DB.QueryRowContext(ctx, r.DB.Rebind(`SELECT `+columns+` FROM qm_inquiries WHERE tenant_id = ? AND id = ?`), tenant, id)
	q, err := scanInquiry(row, true)
	if errors.Is(err, sql.ErrNoRows) {
		return Inquiry{}, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
	}
	return q, err
}

// List returns a page of inquiries, newest first, and the cursor of the next page ("" at the end).
func (r *Reader) List(ctx context.Context, tenant domain.TenantID, f Filter) ([]Inquiry, string, error) {
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit < 1 || f.Limit > MaxLimit {
		return nil, "", domain.Invalid("limit", "must be between 1 and %d", MaxLimit)
	}
	where := []string{"tenant_id = ?"}
	args := []any{tenant}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	if f.Owner != "" {
		where, args = append(where, "owner = ?"), append(args, f.Owner)
	}
	if f.Priority != "" {
		where, args = append(where, "priority = ?"), append(args, f.Priority)
	}
	if f.Team != "" {
		where, args = append(where, "team = ?"), append(args, f.Team)
	}
	if f.Receipt != "" {
		// (tenant_id, receipt) is indexed: a customer's quoted receipt is found without a scan.
		where, args = append(where, "receipt = ?"), append(args, f.Receipt)
	}
	if f.Subject != "" {
		if utf8.RuneCountInString(f.Subject) > domain.MaxSubjectLen {
			return nil, "", domain.Invalid("subject", "must be at most %d characters", domain.MaxSubjectLen)
		}
		where, args = append(where, `lower(subject) LIKE ? ESCAPE '\'`), append(args, "%"+likeEscape(strings.ToLower(f.Subject))+"%")
	}
	where, args = clockFilters(f, where, args)
	if f.Archived != nil && *f.Archived {
		where = append(where, "archived = 1")
	} else {
		where = append(where, "archived = 0")
	}
	if f.Cursor != "" {
		created, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		where = append(where, "(created_at < ? OR (created_at = ? AND id < ?))")
		args = append(args, created, created, id)
	}
	args = append(args, f.Limit+1)
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT `+columns+` FROM qm_inquiries WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at DESC, id DESC LIMIT ?`), args...)
	if err != nil {
		return nil, "", fmt.Errorf("list inquiries: %w", err)
	}
	defer rows.Close()
	var out []Inquiry
	for rows.Next() {
		q, err := scanInquiry(rows, false)
		if err != nil {
			return nil, "", err
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		next = encodeCursor(last.CreatedAt.UnixNano(), string(last.ID))
	}
	return out, next, nil
}

// Timeline returns all of an inquiry's events in order; domain.ErrNotFound if the tenant has no such
// id. Its cost grows with the inquiry's history: requests page with TimelinePage.
func (r *Reader) Timeline(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) ([]TimelineEntry, error) {
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT version, type, actor, occurred_at, data, command_id FROM qm_timeline
		WHERE tenant_id = ? AND inquiry_id = ? ORDER BY version`), tenant, id)
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	defer rows.Close()
	var out []TimelineEntry
	for rows.Next() {
		var e TimelineEntry
		var at int64
		var data string
		if err := rows.Scan(&e.Version, &e.Type, &e.Actor, &at, &data, &e.CommandID); err != nil {
			return nil, err
		}
		e.OccurredAt, e.Data = time.Unix(0, at).UTC(), json.RawMessage(data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
	}
	return out, nil
}

// LastTimelineEntry returns the latest entry of an inquiry's timeline; domain.ErrNotFound if the
// tenant has no such id.
func (r *Reader) LastTimelineEntry(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (TimelineEntry, error) {
	var e TimelineEntry
	var at int64
	var data string
	err := r.DB.QueryRowContext(ctx, r.DB.Rebind(`SELECT version, type, actor, occurred_at, data, command_id FROM qm_timeline
		WHERE tenant_id = ? AND inquiry_id = ? ORDER BY version DESC LIMIT 1`), tenant, id).Scan(&e.Version, &e.Type, &e.Actor, &at, &data, &e.CommandID)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("timeline: %w", err)
	}
	e.OccurredAt, e.Data = time.Unix(0, at).UTC(), json.RawMessage(data)
	return e, nil
}

// Timeline pages: DefaultTimelineLimit entries unless asked for fewer or more, at most
// MaxTimelineLimit.
const (
	DefaultTimelineLimit = 100
	MaxTimelineLimit     = 500
)

// TimelinePage returns at most limit entries of an inquiry's timeline with a version after after,
// in order (keyset by version: a page's cost does not depend on its place in the timeline), and
// next, the after of the following page (0 on the last page). limit ≤ 0 is DefaultTimelineLimit;
// more than MaxTimelineLimit is MaxTimelineLimit. domain.ErrNotFound if the tenant has no such id.
func (r *Reader) TimelinePage(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, after uint64, limit int) ([]TimelineEntry, uint64, error) {
	if limit <= 0 {
		limit = DefaultTimelineLimit
	}
	limit = min(limit, MaxTimelineLimit)
	rows, err := r.DB.QueryContext(ctx, r.DB.Rebind(`SELECT version, type, actor, occurred_at, data, command_id FROM qm_timeline
		WHERE tenant_id = ? AND inquiry_id = ? AND version > ? ORDER BY version LIMIT ?`), tenant, id, int64(min(after, math.MaxInt64)), limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("timeline: %w", err)
	}
	defer rows.Close()
	out := []TimelineEntry{}
	for rows.Next() {
		var e TimelineEntry
		var at int64
		var data string
		if err := rows.Scan(&e.Version, &e.Type, &e.Actor, &at, &data, &e.CommandID); err != nil {
			return nil, 0, err
		}
		e.OccurredAt, e.Data = time.Unix(0, at).UTC(), json.RawMessage(data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(out) == 0 {
		// An empty page past the end of a timeline that exists is no error.
		var one int
		err := r.DB.QueryRowContext(ctx, r.DB.Rebind(`SELECT 1 FROM qm_timeline WHERE tenant_id = ? AND inquiry_id = ? LIMIT 1`), tenant, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, 0, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("timeline: %w", err)
		}
		return out, 0, nil
	}
	var next uint64
	if len(out) > limit {
		out = out[:limit]
		next = out[len(out)-1].Version
	}
	return out, next, nil
}

// likeEscape quotes LIKE's wildcards.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s)
}

func encodeCursor(created int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(created, 10) + "|" + id))
}

func decodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if ts, id, ok := strings.Cut(string(b), "|"); ok {
			if n, err := strconv.ParseInt(ts, 10, 64); err == nil && id != "" {
				return n, id, nil
			}
		}
	}
	return 0, "", domain.Invalid("cursor", "is not a cursor this API returned")
}
