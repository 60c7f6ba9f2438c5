package flatjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// TestEachRefusesWhatJSONRefuses: every input Each handles is valid JSON; the number grammar
// is RFC 8259's, not a looser one.
func TestEachRefusesWhatJSONRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"n":0}`, `{"n":-0}`, `{"n":10}`, `{"n":1.5}`, `{"n":-0.5e10}`, `{"n":2E-3}`, `{"n":3e+1}`,
		`{"n":true}`, `{"n":null}`, `{"o":{"a":1}}`,
		`{"n":00}`, `{"n":01}`, `{"n":-}`, `{"n":+1}`, `{"n":1.}`, `{"n":.5}`, `{"n":1e}`, `{"n":1e+}`,
		`{"n":1-2}`, `{"n":1.2.3}`, `{"n":1ee2}`, `{"n":nul}`, `{"n":truex}`, `{"n":-a}`,
	} {
		handled := Each([]byte(in), func(_, _ []byte, _ Kind) {})
		valid := json.Valid([]byte(in))
		if handled && !valid {
			t.Errorf("Each handled %s, which is not JSON", in)
		}
		if !handled && valid {
			t.Errorf("Each refused %s, which is flat JSON", in)
		}
	}
}

func FuzzEachOnlyValidJSON(f *testing.F) {
	f.Add(`{"a":"b","n":1}`)
	f.Add(`{"n":00}`)
	f.Fuzz(func(t *testing.T, in string) {
		if Each([]byte(in), func(_, _ []byte, _ Kind) {}) && !json.Valid([]byte(in)) {
			t.Fatalf("Each handled %q, which is not JSON", in)
		}
	})
}

// TestEachUnescapesAsJSONDoes: string values with escapes are handled and read exactly as
// encoding/json reads them (lone surrogates included); escapes JSON does not define, escapes in
// keys and control characters are refused.
func TestEachUnescapesAsJSONDoes(t *testing.T) {
	t.Parallel()
	for _, v := range []string{
		`a\"b`, `a\\b`, `\/`, `\b\f\n\r\t`, `\u0041`, `\u00e9`, `\u00E9`, `intake:t\u0000public_form`,
		`\ud83d\ude00`, `\ud83d`, `\ud83dx`, `\ud83d\u0041`, `\ude00`, `\ud83d\ud83d\ude00`, `é\n`, `\u2028`,
	} {
		in := `{"s":"` + v + `"}`
		var got []byte
		if !Each([]byte(in), func(_, val []byte, _ Kind) { got = val }) {
			t.Errorf("Each refused %s", in)
			continue
		}
		var want map[string]string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if string(got) != want["s"] {
			t.Errorf("%s: Each read %q, encoding/json %q", in, got, want["s"])
		}
	}
	for _, in := range []string{
		`{"s":"\x"}`, `{"s":"\'"}`, `{"s":"\u12"}`, `{"s":"\u12g4"}`, `{"s":"\ud83d\u12"}`, `{"s":"a\"}`,
		"{\"s\":\"a\x01\"}", `{"s\u0041":"a"}`, `{"a\"b":"a"}`,
	} {
		if Each([]byte(in), func(_, _ []byte, _ Kind) {}) {
			t.Errorf("Each handled %s", in)
		}
	}
}

// FuzzEachMatchesJSON: what Each handles is valid JSON, and each top-level string member reads
// as encoding/json reads it.
func FuzzEachMatchesJSON(f *testing.F) {
	f.Add(`{"a":"b\u0000c","n":1}`)
	f.Add(`{"a":"\ud83d\ude00","a":"\ud83d"}`)
	f.Add(`{"o":{"a":"\n"},"b":"\\"}`)
	f.Fuzz(func(t *testing.T, in string) {
		last := map[string]string{}
		kinds := map[string]bool{}
		if !Each([]byte(in), func(k, v []byte, kind Kind) {
			last[string(k)], kinds[string(k)] = string(v), kind.IsString()
		}) {
			return
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("Each handled %q, which encoding/json refuses: %v", in, err)
		}
		for k, v := range last {
			if !kinds[k] || bytes.ContainsRune([]byte(k), '.') {
				continue
			}
			if s, ok := want[k].(string); !ok || s != v {
				t.Fatalf("%q: member %q: Each read %q, encoding/json %#v", in, k, v, want[k])
			}
		}
	})
}

// decodesInto reports whether encoding/json reads {key: "x"} (key written as given) into a field
// named name.
func decodesInto(t *testing.T, key, name string) bool {
	t.Helper()
	typ := reflect.StructOf([]reflect.StructField{{Name: "F", Type: reflect.TypeFor[string](), Tag: reflect.StructTag(`json:"` + name + `"`)}})
	v := reflect.New(typ)
	if err := json.Unmarshal([]byte(`{"`+key+`":"x"}`), v.Interface()); err != nil {
		return false
	}
	return v.Elem().Field(0).String() == "x"
}

// TestMayNameCoversWhatJSONMatches: every key encoding/json reads into a field is one MayName
// names, and a plain ASCII key that it does not read is not.
func TestMayNameCoversWhatJSONMatches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key  string
		want bool
	}{
		{"subject", true}, {"Subject", true}, {"SUBJECT", true}, {"ſubject", true}, {`sub\u006aect`, true},
		{`\u0053ubject`, true}, {"subjects", false}, {"subjec", false}, {"sub_ject", false}, {"", false},
		{"submitted_by", false},
	} {
		if got := MayName([]byte(c.key), "subject"); got != c.want {
			t.Errorf("MayName(%q, subject) = %v, want %v", c.key, got, c.want)
		}
		if decodesInto(t, c.key, "subject") && !MayName([]byte(c.key), "subject") {
			t.Errorf("encoding/json reads %q into subject; MayName says no", c.key)
		}
	}
}

func FuzzMayName(f *testing.F) {
	f.Add("subject", "subject")
	f.Add("ſubmitted_by", "submitted_by")
	f.Add("K", "k")
	f.Fuzz(func(t *testing.T, key, name string) {
		for _, c := range []byte(name) {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
				return // Casebook's member names: lower-case ASCII, digits and underscores
			}
		}
		var decoded string
		if name == "" || json.Unmarshal([]byte(`"`+key+`"`), &decoded) != nil {
			return // key must be one JSON string's contents
		}
		if decodesInto(t, key, name) && !MayName([]byte(key), name) {
			t.Fatalf("encoding/json reads %q into %q; MayName says no", key, name)
		}
	})
}
