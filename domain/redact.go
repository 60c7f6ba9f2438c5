package domain

import (
	"log/slog"
	"unicode/utf8"
)

// The LogValue methods below make every type that holds personal data (FieldClasses: Personal) log
// redacted: ids, classes and lengths, never the values.

// LogValue implements slog.LogValuer; a principal's display name is personal data.
func (p Principal) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", string(p.ID)), slog.String("tenant_id", string(p.TenantID)),
		slog.String("role", string(p.Role)), slog.String("team", p.Team))
}

// LogValue implements slog.LogValuer.
func (n NewInquiry) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", string(n.ID)), slog.String("tenant_id", string(n.TenantID)),
		slog.String("source", string(n.Source)), slog.Any("requester", n.Requester),
		slog.Int("subject_len", utf8.RuneCountInString(n.Subject)), slog.Int("message_len", utf8.RuneCountInString(n.Message)),
		slog.String("category", n.Category))
}

// LogValue implements slog.LogValuer.
func (e InquiryReceived) LogValue() slog.Value {
	return slog.GroupValue(slog.String("type", e.EventType()), slog.String("inquiry_id", string(e.InquiryID)),
		slog.String("tenant_id", string(e.TenantID)), slog.String("source", string(e.Source)), slog.Any("requester", e.Requester),
		slog.Int("subject_len", utf8.RuneCountInString(e.Subject)), slog.Int("message_len", utf8.RuneCountInString(e.Message)),
		slog.String("category", e.Category), slog.String("priority", string(e.Priority)))
}

// LogValue implements slog.LogValuer.
func (e NoteAdded) LogValue() slog.Value {
	return slog.GroupValue(slog.String("type", e.EventType()), slog.Int("body_len", utf8.RuneCountInString(e.Body)))
}

// LogValue implements slog.LogValuer.
func (q Inquiry) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", string(q.ID)), slog.String("tenant_id", string(q.TenantID)),
		slog.String("status", string(q.Status)), slog.String("priority", string(q.Priority)),
		slog.String("owner", string(q.Owner)), slog.Uint64("version", q.Version), slog.Any("requester", q.Requester),
		slog.Int("subject_len", utf8.RuneCountInString(q.Subject)), slog.Int("message_len", utf8.RuneCountInString(q.Message)))
}

// LogValue implements slog.LogValuer; a follow-up's note is operator text about the requester.
func (e FollowUpScheduled) LogValue() slog.Value {
	return slog.GroupValue(slog.String("type", e.EventType()), slog.String("job_id", e.JobID),
		slog.Time("due_at", e.DueAt), slog.Int("note_len", utf8.RuneCountInString(e.Note)))
}
