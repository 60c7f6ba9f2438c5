package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/casebook/casebook/eventstore"
)

// readColumns are the types of readAllSQL's result columns, in order.
var readColumns = []uint32{pgtype.BoolOID, pgtype.XID8OID, pgtype.Int8OID, pgtype.TextOID, pgtype.TextOID,
	pgtype.Int8OID, pgtype.TextOID, pgtype.ByteaOID, pgtype.ByteaOID, pgtype.TimestamptzOID}

// rawReader decodes readAllSQL's rows straight from their binary values: reading the log is the
// hot path of every rebuild, and pgx's generic Scan costs more than the query. Strings that repeat
// from row to row (stream, type) are shared.
type rawReader struct {
	stream, typ []string // recent distinct values
}

// binaryRows reports whether rows come in the layout rawReader decodes.
func binaryRows(fields []pgconn.FieldDescription) bool {
	if len(fields) != len(readColumns) {
		return false
	}
	for i, f := range fields {
		if f.DataTypeOID != readColumns[i] {
			return false
		}
		// A text value's text and binary forms are the same bytes; pgx asks for text.
		if f.Format != pgx.BinaryFormatCode && f.DataTypeOID != pgtype.TextOID {
			return false
		}
	}
	return true
}

var errRawValue = errors.New("eventstore/postgres: malformed binary value")

// pgEpochMicros is where Postgres counts timestamps from (2000-01-01 UTC), in Unix microseconds.
const pgEpochMicros = 946_684_800_000_000

// decode reads one row; held reports an event above the horizon, whose payload is absent.
func (r *rawReader) decode(vals [][]byte) (e eventstore.RecordedEvent, held bool, err error) {
	if len(vals) != len(readColumns) {
		return e, false, errRawValue
	}
	for i, v := range vals {
		if v == nil && i != 7 && i != 8 {
			return e, false, fmt.Errorf("%w: column %d is NULL", errRawValue, i)
		}
	}
	if len(vals[0]) != 1 || len(vals[1]) != 8 || len(vals[2]) != 8 || len(vals[5]) != 8 || len(vals[9]) != 8 {
		return e, false, errRawValue
	}
	held = vals[0][0] != 0
	e.Position = eventstore.Position{Commit: binary.BigEndian.Uint64(vals[1]), Prepare: binary.BigEndian.Uint64(vals[2])}
	if held {
		return e, true, nil
	}
	e.ID = string(vals[3])
	e.StreamID = share(&r.stream, vals[4])
	e.Revision = binary.BigEndian.Uint64(vals[5])
	e.Type = share(&r.typ, vals[6])
	if vals[7] == nil || vals[8] == nil {
		return e, false, fmt.Errorf("%w: event %s has no payload", errRawValue, e.ID)
	}
	// One allocation holds both payloads.
	buf := make([]byte, len(vals[7])+len(vals[8]))
	n := copy(buf, vals[7])
	copy(buf[n:], vals[8])
	e.Data, e.Metadata = buf[:n:n], buf[n:]
	e.RecordedAt = time.UnixMicro(int64(binary.BigEndian.Uint64(vals[9])) + pgEpochMicros).UTC()
	return e, false, nil
}

// share returns b as a string, reusing one of the last few distinct values when equal.
func share(recent *[]string, b []byte) string {
	for _, s := range *recent {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	if len(*recent) < 8 {
		*recent = append(*recent, s)
	} else {
		copy((*recent)[1:], (*recent)[:7])
		(*recent)[0] = s
	}
	return s
}
