package eventstore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
)

// written is metadata as the command side writes it: json.Marshal of domain.Metadata, with a
// command id that holds NUL separators (escaped as \u0000).
func written(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(domain.Metadata{
		TenantID: "36bb3bc4-5307-4479-a8b7-ab41a7cdac48", Actor: "system:public_form",
		CommandID:      "intake:36bb3bc4-5307-4479-a8b7-ab41a7cdac48\x00public_form\x00auto:203c55bd",
		IdempotencyKey: "auto:203c55bd", RequestHash: "ORTLND66FFFWKEUTF7FGX4JAK4", CorrelationID: "req_5af2ea02033f60a0",
		OccurredAt: time.Date(2026, 12, 1, 19, 36, 42, 292449914, time.UTC), SchemaVersion: domain.SchemaVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWrittenMetadataTakesTheFastPath: the metadata every event carries is decoded without
// encoding/json (a command id with escapes once sent every event down the slow path).
func TestWrittenMetadataTakesTheFastPath(t *testing.T) {
	t.Parallel()
	b := written(t)
	m, ok := fastMetadata(b)
	if !ok {
		t.Fatalf("fast path refused %s", b)
	}
	var want domain.Metadata
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Fatalf("fast path read (-json +fast):\n%s", diff)
	}
	for _, b := range [][]byte{
		[]byte(`{"tenant_id":"t","actor":"a","occurred_at":"2026-11-01T09:00:00Z","schema_version":1}`),
		[]byte(` {"tenant_id" : "t\/1", "occurred_at":"2026-11-01T09:00:00+02:00", "schema_version":1 } `),
	} {
		if _, ok := fastMetadata(b); !ok {
			t.Errorf("fast path refused %s", b)
		}
	}
}

// checkMetadata fails unless DecodeMetadata agrees with encoding/json on b: the same error or none,
// and the same fields.
func checkMetadata(t *testing.T, b []byte) {
	t.Helper()
	var want domain.Metadata
	werr := json.Unmarshal(b, &want)
	got, err := DecodeMetadata(b)
	if (werr == nil) != (err == nil) {
		t.Fatalf("%q: encoding/json error %v, DecodeMetadata error %v", b, werr, err)
	}
	if werr != nil {
		return
	}
	if !got.OccurredAt.Equal(want.OccurredAt) || got.OccurredAt.Location().String() != want.OccurredAt.Location().String() {
		t.Fatalf("%q: occurred_at %v, encoding/json %v", b, got.OccurredAt, want.OccurredAt)
	}
	got.OccurredAt, want.OccurredAt = time.Time{}, time.Time{}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q (-json +DecodeMetadata):\n%s", b, diff)
	}
}

var metadataSeeds = []string{
	`{"tenant_id":"t","actor":"a","command_id":"c\u0000d","idempotency_key":"k","request_hash":"h","correlation_id":"r","occurred_at":"2026-11-01T09:00:00.5Z","schema_version":1}`,
	`{"tenant_id":"t\u002d1","actor":"p","occurred_at":"2026-11-01T09:00:00Z","schema_version":1}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00\u005a","schema_version":1}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00+02:00","schema_version":1,"x":[1]}`,
	`{"Tenant_ID":"t","occurred_at":"2026-11-01T09:00:00Z","schema_version":1}`,
	`{"tenant_id":"t","tenant_id":"u","occurred_at":"2026-11-01T09:00:00Z","schema_version":1}`,
	`{"tenant_id":5}`,
	`{"tenant_id":null,"actor":"a","occurred_at":"2026-11-01T09:00:00Z","schema_version":1}`,
	`{"tenant_id":"t","occurred_at":null,"schema_version":1}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00Z","schema_version":null}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00Z","schema_version":01}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00Z","schema_version":1.0}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00Z","schema_version":99999999999999999999}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T9:00:00Z","schema_version":1}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00Z","schema_version":1,"x":1.}`,
	`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00Z"}`,
	`{}`,
	`not json`,
}

// TestDecodeMetadataMatchesJSON: DecodeMetadata reads what encoding/json reads, and fails where it
// fails, on metadata both paths handle and on metadata only encoding/json can.
func TestDecodeMetadataMatchesJSON(t *testing.T) {
	t.Parallel()
	checkMetadata(t, written(t))
	for _, s := range metadataSeeds {
		checkMetadata(t, []byte(s))
	}
}

func FuzzDecodeMetadata(f *testing.F) {
	for _, s := range metadataSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkMetadata(t, []byte(s)) })
}
