package postgres

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/eventstore"
)

// TestRawDecodeMatchesScan: the log read decodes rows from their raw values (the server answers in
// the layout it expects), and what it returns equals what pgx's Scan makes of the same rows: positions,
// strings, empty and non-empty payloads, recording times to the microsecond.
func TestRawDecodeMatchesScan(t *testing.T) {
	t.Parallel()
	pool := gapPool(t)
	s := gapStore(t, pool, Options{})
	ctx := t.Context()
	for i, stream := range []string{"a-1", "b-1", "a-1", "ünï-1"} {
		evs := []eventstore.EventData{
			{ID: eventstore.DeterministicID(stream, i), Type: "Opened", Data: []byte(`{"n":1}`), Metadata: []byte(`{"m":"x"}`)},
			{ID: eventstore.DeterministicID(stream, i+10), Type: "Empty", Data: []byte{}, Metadata: []byte{}},
		}
		if _, err := s.Append(ctx, stream, eventstore.Any(), evs); err != nil {
			t.Fatal(err)
		}
	}
	// ReadAll waits for the horizon to pass the appends (other tests' transactions may hold it).
	got, err := s.ReadAll(ctx, eventstore.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, readAllSQL, uint64(0), int64(0), limitOf(0))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !binaryRows(rows.FieldDescriptions()) {
		t.Fatalf("the log read is not in the binary layout: %+v", rows.FieldDescriptions())
	}
	var want []eventstore.RecordedEvent
	for rows.Next() {
		var held bool
		e, err := scanEvent(rows, &held)
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			want = append(want, e)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != 8 {
		t.Fatalf("scanned %d events, want 8", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("raw decoding differs from Scan (-scan +raw):\n%s", diff)
	}
	for _, e := range got {
		if e.RecordedAt.Location() != time.UTC || e.Data == nil || e.Metadata == nil {
			t.Fatalf("event %s: recorded at %v, data %v, metadata %v", e.ID, e.RecordedAt, e.Data, e.Metadata)
		}
	}
}

// TestRawDecodeRefusesMalformedValues: a NULL where a value belongs, a fixed-width value of the wrong
// width, or a missing payload is an error, never a guess.
func TestRawDecodeRefusesMalformedValues(t *testing.T) {
	good := [][]byte{{0}, make([]byte, 8), make([]byte, 8), []byte("id"), []byte("s-1"), make([]byte, 8), []byte("T"),
		[]byte("{}"), []byte("{}"), make([]byte, 8)}
	var r rawReader
	if _, _, err := r.decode(good); err != nil {
		t.Fatalf("good row: %v", err)
	}
	with := func(i int, v []byte) [][]byte {
		row := append([][]byte(nil), good...)
		row[i] = v
		return row
	}
	for i := range good {
		if _, _, err := r.decode(with(i, nil)); err == nil {
			t.Errorf("column %d NULL decoded", i)
		}
	}
	for _, i := range []int{0, 1, 2, 5, 9} { // bool, xid8, int8, int8, timestamptz
		if _, _, err := r.decode(with(i, make([]byte, 3))); err == nil {
			t.Errorf("column %d of 3 bytes decoded", i)
		}
	}
	held := with(0, []byte{1})
	held[7], held[8] = nil, nil
	if _, isHeld, err := r.decode(held); err != nil || !isHeld {
		t.Fatalf("held row: held %v, err %v", isHeld, err)
	}
}
