package commands

import (
	"log/slog"
	"unicode/utf8"
)

// LogValue implements slog.LogValuer: ids and lengths only, never the requester's data or text.
func (c Intake) LogValue() slog.Value {
	return slog.GroupValue(slog.String("tenant", string(c.Tenant)), slog.String("source", string(c.Source)),
		slog.Bool("key_set", c.IdempotencyKey != ""), slog.Any("requester", c.Requester),
		slog.Int("subject_len", utf8.RuneCountInString(c.Subject)), slog.Int("message_len", utf8.RuneCountInString(c.Message)),
		slog.String("category", c.Category), slog.String("correlation_id", c.CorrelationID))
}

// LogValue implements slog.LogValuer for every command that embeds Target: ids only, and the actor
// without its name.
func (t Target) LogValue() slog.Value {
	return slog.GroupValue(slog.String("tenant", string(t.Tenant)), slog.String("inquiry_id", string(t.InquiryID)),
		slog.Any("actor", t.Actor), slog.Bool("if_version_set", t.IfVersion != nil),
		slog.Bool("key_set", t.IdempotencyKey != ""), slog.String("correlation_id", t.CorrelationID))
}

// LogValue implements slog.LogValuer: a note's body is personal data and logs as its length.
func (c AddNote) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("target", c.Target), slog.Int("body_len", utf8.RuneCountInString(c.Body)))
}
