package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/eventstore"
)

func testCompanions(claim string) []*eventstore.Companion {
	return []*eventstore.Companion{
		{Table: "command_audit", Columns: []string{"request_id", "at"}, Values: func(string) []any { return []any{"req-" + claim, int64(1)} }},
		eventstore.ClaimCompanion(nil, claim),
	}
}

// TestWithCompanions: an append's statement with its companions numbers their parameters after
// the append's own; a second append of the same shape gets the same text (kept) with its own
// values; another column list or another append statement gets a text of its own; a companion whose
// values do not match its columns is refused.
func TestWithCompanions(t *testing.T) {
	t.Parallel()
	q1, args1, err := withCompanions(appendNoStream, []any{"s", "t", "i", "y", "d", "m"}, testCompanions("a"), "inquiry-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"INSERT INTO command_audit (request_id, at)\n\tSELECT $7, $8 WHERE EXISTS", "INSERT INTO stream_claims (name, stream)\n\tSELECT $9, $10 WHERE EXISTS"} {
		if !strings.Contains(q1, want) {
			t.Errorf("statement lacks %q:\n%s", want, q1)
		}
	}
	if diff := cmp.Diff([]any{"s", "t", "i", "y", "d", "m", "req-a", int64(1), "a", "inquiry-1"}, args1); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	q2, args2, err := withCompanions(appendNoStream, []any{"s", "t", "i", "y", "d", "m"}, testCompanions("b"), "inquiry-2")
	if err != nil {
		t.Fatal(err)
	}
	if q2 != q1 {
		t.Errorf("the same shape made another text:\n%s\n%s", q1, q2)
	}
	if args2[6] != "req-b" || args2[8] != "b" || args2[9] != "inquiry-2" {
		t.Errorf("second append's args %v", args2)
	}
	// appendExact has a seventh parameter: the companions' are numbered from $8.
	q3, _, err := withCompanions(appendExact, []any{"s", "t", "i", "y", "d", "m", int64(0)}, testCompanions("c"), "inquiry-3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(q3, "SELECT $8, $9 WHERE EXISTS") || !strings.Contains(q3, "$10, $11") {
		t.Errorf("appendExact's companions are not numbered from $8:\n%s", q3)
	}
	other := testCompanions("d")
	other[0].Columns = []string{"request_id", "code"}
	q4, _, err := withCompanions(appendNoStream, []any{"s", "t", "i", "y", "d", "m"}, other, "inquiry-4")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(q4, "INSERT INTO command_audit (request_id, code)") {
		t.Errorf("another column list got a kept text:\n%s", q4)
	}
	bad := testCompanions("e")
	bad[0].Values = func(string) []any { return []any{"only one"} }
	if _, _, err := withCompanions(appendNoStream, []any{"s", "t", "i", "y", "d", "m"}, bad, "inquiry-5"); err == nil {
		t.Error("a companion with one value for two columns was accepted")
	}
}

// TestCompanionTextsBounded: past maxCompanionTexts shapes the cache keeps no more, and every text
// is still the one written for its shape.
func TestCompanionTextsBounded(t *testing.T) {
	t.Parallel()
	tc := textCache{texts: map[companionShape]string{}}
	for i := range 2 * maxCompanionTexts {
		cs := []*eventstore.Companion{{Table: fmt.Sprintf("t%d", i), Columns: []string{"a"}}}
		for range 2 {
			if got, want := tc.text(appendAny, 7, cs), companionsText(appendAny, 7, cs); got != want {
				t.Fatalf("shape %d: text\n%s\nwant\n%s", i, got, want)
			}
		}
	}
	if len(tc.texts) != maxCompanionTexts {
		t.Fatalf("%d texts kept, want %d", len(tc.texts), maxCompanionTexts)
	}
}

// BenchmarkWithCompanions: an intake's append statement with its three companion rows, its text
// kept and written anew.
func BenchmarkWithCompanions(b *testing.B) {
	cs := append(testCompanions("a"), &eventstore.Companion{Table: "inquiry_keys",
		Columns: []string{"tenant_id", "inquiry_id", "wrapped", "kek_id", "created_at"},
		Values:  func(string) []any { return []any{"t", "i", []byte{1}, "k", int64(1)} }})
	args := []any{"s", "t", "i", "y", "d", "m"}
	b.Run("kept", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := withCompanions(appendNoStream, args, cs, "inquiry-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("written", func(b *testing.B) {
		for b.Loop() {
			_ = companionsText(appendNoStream, len(args)+1, cs)
		}
	})
}
