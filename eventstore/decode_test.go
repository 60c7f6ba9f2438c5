package eventstore

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
)

// checkEvent fails unless DecodeEvent agrees with domain.Decode on data: the same error or none,
// and the same event.
func checkEvent(t *testing.T, typ string, data []byte) {
	t.Helper()
	want, werr := domain.Decode(typ, domain.SchemaVersion, data)
	got, err := DecodeEvent(typ, domain.SchemaVersion, data)
	if (werr == nil) != (err == nil) {
		t.Fatalf("%s %q: domain.Decode error %v, DecodeEvent error %v", typ, data, werr, err)
	}
	if diff := cmp.Diff(want, got); werr == nil && diff != "" {
		t.Fatalf("%s %q (-domain.Decode +DecodeEvent):\n%s", typ, data, diff)
	}
}

var eventSeeds = []struct {
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
	{"InquiryReceived", `{"inquiry_id":"i","receipt":"R","priority":"normal","sealed":"AAAA","source":"public_form","tenant_id":"t"}`},
	{"InquiryReceived", `{"inquiry_id":"i","submitted_by":"p1","external_id":"c-1","team":"ops","permalink":"https://x/p"}`},
	{"InquiryReceived", `{"inquiry_id":"i","SUBMITTED_BY":"p1"}`},
	{"InquiryReceived", `{"inquiry_id":"i","ſubject":"s"}`},
	{"InquiryReceived", `{"inquiry_id":"i","requester.name":"n"}`},
	{"InquiryReceived", `{"inquiry_id":"i","requester":{"name":"n","EMAIL":"e"}}`},
	{"InquiryReceived", `{"inquiry_id":"i","source":"slack","requester":{"slack_user":"U1","Slack_User":"U2"}}`},
	{"InquiryReceived", `{"inquiry_id":"i","requester":{"name":"n","phone":"p"},"other":{"name":"x"}}`},
	{"InquiryReceived", `{"inquiry_id":"i\u0000j","subject":"\ud83d\ude00 \ud83d"}`},
	{"InquiryTriaged", `{"priority":"high","Priority":"low"}`},
	{"InquiryTriaged", `{"priority":"high","note":"x"}`},
	{"InquiryStatusChanged", `{"from":"new","to":"triaged","TO":"cancelled"}`},
	{"InquiryAssigned", `{"owner":"p1","teams":"x"}`},
	{"NoteAdded", `{"body":"b","bodies":"x"}`},
}

// TestFastDecodeMatchesJSON: the reflection-free decoding gives what domain.Decode gives, members
// it ignores and names in another case included.
func TestFastDecodeMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, s := range eventSeeds {
		checkEvent(t, s.typ, []byte(s.data))
	}
}

// TestWrittenEventsTakeTheFastPath: an intake as the command side writes it, and as a subscriber
// reading the log as stored sees it (personal members sealed), is decoded without reflection.
func TestWrittenEventsTakeTheFastPath(t *testing.T) {
	t.Parallel()
	typ, data, err := domain.Encode(domain.InquiryReceived{InquiryID: "i", TenantID: "t", Source: domain.SourceAPI, Receipt: "CB-1",
		Requester: domain.Requester{Name: "Zoë \"Z\"", Email: "z@example.com"}, Subject: "s", Message: "line\nline", Priority: domain.PriorityNormal,
		SubmittedBy: "p1", ExternalID: "c-1", Team: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	stored := []byte(`{"inquiry_id":"i","priority":"normal","receipt":"CB-1","source":"public_form","tenant_id":"t","sealed":"AAAA"}`)
	for _, b := range [][]byte{data, stored} {
		if _, ok := fastEvent(typ, b); !ok {
			t.Errorf("%s went to domain.Decode", b)
		}
		checkEvent(t, typ, b)
	}
}

func FuzzFastDecodeMatchesJSON(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add(s.typ, s.data)
	}
	f.Fuzz(func(t *testing.T, typ, data string) { checkEvent(t, typ, []byte(data)) })
}

// TestFastPathKnowsEveryField: for each type the fast path decodes, an event with every string
// field set (nested ones included) takes the fast path and decodes as domain.Decode decodes it: a
// field added to the type and not to the fast path fails here.
func TestFastPathKnowsEveryField(t *testing.T) {
	t.Parallel()
	for _, e := range []domain.Event{domain.InquiryTriaged{}, domain.InquiryStatusChanged{}, domain.InquiryAssigned{},
		domain.InquiryReceived{}, domain.NoteAdded{}} {
		v := reflect.New(reflect.TypeOf(e)).Elem()
		n := 0
		var fill func(reflect.Value)
		fill = func(v reflect.Value) {
			for i := range v.NumField() {
				switch f := v.Field(i); f.Kind() {
				case reflect.String:
					n++
					f.SetString(fmt.Sprintf("v%d", n))
				case reflect.Struct:
					fill(f)
				default:
					t.Fatalf("%T.%s: a %s field; teach this test and the fast path", e, v.Type().Field(i).Name, f.Kind())
				}
			}
		}
		fill(v)
		typ, data, err := domain.Encode(v.Interface().(domain.Event))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := fastEvent(typ, data)
		if !ok {
			t.Errorf("%s %s went to domain.Decode", typ, data)
			continue
		}
		if diff := cmp.Diff(v.Interface(), got); diff != "" {
			t.Errorf("%s %s (-written +fast):\n%s", typ, data, diff)
		}
	}
}
