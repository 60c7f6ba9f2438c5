package flatjson

import (
	"encoding/json"
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
		handled := Each([]byte(in), func(_, _ []byte, _ bool) {})
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
		if Each([]byte(in), func(_, _ []byte, _ bool) {}) && !json.Valid([]byte(in)) {
			t.Fatalf("Each handled %q, which is not JSON", in)
		}
	})
}
