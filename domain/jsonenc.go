package domain

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends m as json.Marshal writes it (FuzzMetadataAppendJSON), without reflection:
// every command writes one. It returns nil when json.Marshal refuses m: an OccurredAt outside
// the years 0-9999 or with a zone offset of a day or more.
func (m Metadata) AppendJSON(b []byte) []byte {
	_, off := m.OccurredAt.Zone()
	if y := m.OccurredAt.Year(); y < 0 || y > 9999 || off <= -86400 || off >= 86400 {
		return nil
	}
	b = append(b, `{"tenant_id":`...)
	b = AppendJSONString(b, string(m.TenantID))
	b = append(b, `,"actor":`...)
	b = AppendJSONString(b, string(m.Actor))
	b = append(b, `,"command_id":`...)
	b = AppendJSONString(b, m.CommandID)
	if m.IdempotencyKey != "" {
		b = append(b, `,"idempotency_key":`...)
		b = AppendJSONString(b, m.IdempotencyKey)
	}
	if m.RequestHash != "" {
		b = append(b, `,"request_hash":`...)
		b = AppendJSONString(b, m.RequestHash)
	}
	if m.CorrelationID != "" {
		b = append(b, `,"correlation_id":`...)
		b = AppendJSONString(b, m.CorrelationID)
	}
	b = append(b, `,"occurred_at":"`...)
	b = m.OccurredAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","schema_version":`...)
	b = strconv.AppendInt(b, int64(m.SchemaVersion), 10)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as encoding/json's Marshal writes a string: HTML-safe (<, > and &
// escaped), invalid UTF-8 as U+FFFD, and U+2028 and U+2029 escaped.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
