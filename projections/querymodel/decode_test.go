package querymodel

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// slowMeta is the reference: what encoding/json makes of the metadata, reduced to the fields the
// query model reads.
func slowMeta(b []byte) (domain.Metadata, error) {
	var m domain.Metadata
	err := json.Unmarshal(b, &m)
	return domain.Metadata{TenantID: m.TenantID, Actor: m.Actor, OccurredAt: m.OccurredAt, SchemaVersion: m.SchemaVersion}, err
}

func fastMeta(b []byte) (domain.Metadata, error) {
	m, err := eventstore.DecodeMetadata(b)
	return domain.Metadata{TenantID: m.TenantID, Actor: m.Actor, OccurredAt: m.OccurredAt, SchemaVersion: m.SchemaVersion}, err
}

func checkSame(t *testing.T, typ string, meta, data []byte) {
	t.Helper()
	sm, serr := slowMeta(meta)
	fm, ferr := fastMeta(meta)
	if (serr == nil) != (ferr == nil) {
		t.Fatalf("metadata %q: json err %v, fast err %v", meta, serr, ferr)
	}
	if serr == nil && (!sm.OccurredAt.Equal(fm.OccurredAt) || sm.TenantID != fm.TenantID || sm.Actor != fm.Actor || sm.SchemaVersion != fm.SchemaVersion) {
		t.Fatalf("metadata %q: json %+v, fast %+v", meta, sm, fm)
	}
	se, serr := domain.Decode(typ, domain.SchemaVersion, data)
	fe, ferr := decodeEvent(typ, domain.SchemaVersion, data)
	if (serr == nil) != (ferr == nil) {
		t.Fatalf("event %s %q: json err %v, fast err %v", typ, data, serr, ferr)
	}
	if diff := cmp.Diff(se, fe); serr == nil && diff != "" {
		t.Fatalf("event %s %q: %s", typ, data, diff)
	}
}

var seeds = []struct {
	typ  string
	data string
}{
	{"InquiryTriaged", `{"priority":"high"}`},
	{"InquiryStatusChanged", `{"from":"new","to":"cancelled","reason":"spam \u00e9 \"quoted\""}`},
	{"InquiryStatusChanged", `{"from":"waiting","to":"in_progress"}`},
	{"InquiryAssigned", `{"owner":"p1","previous":"","team":"support"}`},
	{"InquiryAssigned", `{"owner":null}`},
	{"NoteAdded", `{"body":"line\nbreak"}`},
	{"NoteAdded", `{"body":"plain ünïcödé","extra":1}`},
	{"NoteAdded", ` { "body" : "spaced" } `},
	{"NoteAdded", `{"body":{"nested":true}}`},
	{"NoteAdded", `{"body":"b","n":00}`},
	{"NoteAdded", `{"body":"b","n":-}`},
	{"NoteAdded", `{"body":"b","n":1e}`},
	{"NoteAdded", `{"body":"b","n":-0.5E+3}`},
	{"NoteAdded", `{"body":12}`},
	{"InquiryTriaged", `{"priority":"high","priority":null}`},
	{"NoteAdded", `{"BodY":{}}`},
	{"NoteAdded", `{"body":{}}`},
	{"InquiryReceived", `{"inquiry_id":"i","requester":{}}`},
	{"InquiryReceived", `{"inquiry_id":"i","tenant_id":"t","source":"api","receipt":"R","requester":{"name":"n","email":"e@x.io"},"subject":"s","message":"m","priority":"normal"}`},
	{"InquiryReceived", `{"inquiry_id":"i","requester":{"name":"n","email":null},"requester":{"name":"m"},"category":"c"}`},
	{"InquiryReceived", `{"inquiry_id":"i","requester":null,"subject":"s"}`},
	{"InquiryReceived", `{"inquiry_id":"i","requester":{"name":{"deep":1}}}`},
	{"InquiryReceived", `{"inquiry_id":"i","requester":"str"}`},
}

// TestFastDecodeMatchesJSON: the reflection-free decoding gives what encoding/json gives.
func TestFastDecodeMatchesJSON(t *testing.T) {
	t.Parallel()
	meta, _ := json.Marshal(domain.Metadata{TenantID: "t-1", Actor: "p", CommandID: "c", IdempotencyKey: "k",
		RequestHash: "h", OccurredAt: time.Date(2026, 11, 1, 9, 0, 0, 123456789, time.UTC), SchemaVersion: 1})
	metas := [][]byte{meta,
		[]byte(`{"tenant_id":"t\u002d1","actor":"p","occurred_at":"2026-11-01T09:00:00Z","schema_version":1}`),
		[]byte(`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00+02:00","schema_version":1,"x":[1]}`),
		[]byte(`{"tenant_id":5}`),
		[]byte(`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00Z","schema_version":01}`),
		[]byte(`{"tenant_id":"t","occurred_at":"2026-11-01T9:00:00Z","schema_version":1}`),
		[]byte(`{"tenant_id":"t","occurred_at":"2026-11-01T09:00:00Z","schema_version":1,"x":1.}`),
		[]byte(`not json`),
	}
	for _, m := range metas {
		for _, s := range seeds {
			checkSame(t, s.typ, m, []byte(s.data))
		}
	}
}

func FuzzFastDecodeMatchesJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add(s.typ, `{"tenant_id":"t","actor":"a","occurred_at":"2026-11-01T09:00:00Z","schema_version":1}`, s.data)
	}
	f.Fuzz(func(t *testing.T, typ, meta, data string) {
		checkSame(t, typ, []byte(meta), []byte(data))
	})
}
