package domain

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestMetadataAppendJSONKnowsEveryField: every field of Metadata, set, is written as
// json.Marshal writes it, so a field added without AppendJSON learning it fails here.
func TestMetadataAppendJSONKnowsEveryField(t *testing.T) {
	var m Metadata
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Date(2026, 12, 2, 9, 0, i, 5000, time.UTC)))
		case f.Kind() == reflect.String:
			f.SetString(fmt.Sprintf("<v%d>", i))
		case f.Kind() == reflect.Int:
			f.SetInt(int64(i + 1))
		default:
			t.Fatalf("Metadata.%s is a %s: teach AppendJSON and this test about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	want, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.AppendJSON(nil); string(got) != string(want) {
		t.Errorf("AppendJSON = %s\njson.Marshal = %s", got, want)
	}
}

// TestMetadataAppendJSON: the metadata every command stores is json.Marshal's text.
func TestMetadataAppendJSON(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 30, 0, 120000000, time.UTC)
	for _, m := range []Metadata{
		{},
		{TenantID: "t1", Actor: "system:public_form", CommandID: "intake:abc", OccurredAt: at, SchemaVersion: SchemaVersion},
		{TenantID: "t<1>", Actor: "p&q", CommandID: "c\"\\", IdempotencyKey: "k\u2028", RequestHash: "H", CorrelationID: "\xff\n",
			OccurredAt: at.In(time.FixedZone("JST", 9*3600)), SchemaVersion: -12},
		{OccurredAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), SchemaVersion: 1 << 40},
	} {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Errorf("AppendJSON = %s\njson.Marshal = %s", got[1:], want)
		}
	}
	bad := Metadata{OccurredAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(bad); err == nil {
		t.Fatal("json.Marshal took year 10000")
	}
	if got := bad.AppendJSON(nil); got != nil {
		t.Errorf("AppendJSON(year 10000) = %s, want nil", got)
	}
}

func FuzzMetadataAppendJSON(f *testing.F) {
	f.Add("t1", "actor", "cmd", "key", "", "<&>\u2029", int64(1764667800123456789), 1, 0)
	f.Add("", "\x00", "\xe6\x97", "", "h", "", int64(-62135596800), -5, -34200)
	f.Add("", "", "", "", "", "", int64(0), 0, 86400)
	f.Fuzz(func(t *testing.T, tenant, actor, command, key, hash, corr string, nanos int64, schema, offset int) {
		at := time.Unix(0, nanos).In(time.FixedZone("z", offset%(2*86400)))
		m := Metadata{TenantID: TenantID(tenant), Actor: PrincipalID(actor), CommandID: command, IdempotencyKey: key,
			RequestHash: hash, CorrelationID: corr, OccurredAt: at, SchemaVersion: schema}
		want, err := json.Marshal(m)
		got := m.AppendJSON(nil)
		if err != nil {
			if got != nil {
				t.Fatalf("json.Marshal refused (%v), AppendJSON wrote %s", err, got)
			}
			return
		}
		if string(got) != string(want) {
			t.Fatalf("AppendJSON = %s\njson.Marshal = %s", got, want)
		}
	})
}
