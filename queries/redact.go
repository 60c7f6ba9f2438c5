package queries

import (
	"log/slog"
	"unicode/utf8"
)

// LogValue implements slog.LogValuer: the requester, subject and message are personal data.
func (q Inquiry) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", string(q.ID)), slog.String("status", string(q.Status)),
		slog.Uint64("version", q.Version), slog.String("owner", string(q.Owner)),
		slog.Bool("requester_set", q.Requester != nil), slog.Int("subject_len", utf8.RuneCountInString(q.Subject)),
		slog.Int("message_len", utf8.RuneCountInString(q.Message)))
}
