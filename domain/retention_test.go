package domain_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
)

// TestParseRetentionPolicy: the strict decoding of a retention policy, one refusal per rule, and
// the canonical form of what it accepts.
func TestParseRetentionPolicy(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"empty":                   `{}`,
		"no classes":              `{"classes":{}}`,
		"unknown field":           `{"classes":{"x":{}},"retain":"1d"}`,
		"unknown rule":            `{"classes":{"x":{"deleted_for":"1d"}}}`,
		"class not a slug":        `{"classes":{"Bad Name":{}}}`,
		"rule under an hour":      `{"classes":{"x":{"archived_for":"59m"}}}`,
		"rule over 100 years":     `{"classes":{"x":{"closed_for":"36700d"}}}`,
		"negative days":           `{"classes":{"x":{"closed_for":"-1d"}}}`,
		"not a duration":          `{"classes":{"x":{"closed_for":"a week"}}}`,
		"number for a duration":   `{"classes":{"x":{"closed_for":86400}}}`,
		"default names no class":  `{"classes":{"x":{}},"default_class":"y"}`,
		"category names no class": `{"classes":{"x":{}},"categories":{"billing":"y"}}`,
		"empty category":          `{"classes":{"x":{}},"categories":{"":"x"}}`,
		"trailing data":           `{"classes":{"x":{}}} {}`,
	} {
		if _, err := domain.ParseRetentionPolicy([]byte(doc)); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%s: err = %v, want a validation error", name, err)
		}
	}
	p, err := domain.ParseRetentionPolicy([]byte(`{"classes":{"std":{"archived_for":"90d","closed_for":"36h"},"keep":{}},
		"default_class":"std","categories":{"legal":"keep"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(p.Encode()), `{"classes":{"keep":{},"std":{"archived_for":"90d","closed_for":"36h0m0s"}},"default_class":"std","categories":{"legal":"keep"}}`; got != want {
		t.Fatalf("canonical = %s, want %s", got, want)
	}
	again, err := domain.ParseRetentionPolicy(p.Encode())
	if err != nil || string(again.Encode()) != string(p.Encode()) {
		t.Fatalf("the canonical form does not parse back to itself: %v", err)
	}
}

// TestRetentionDueAt: when a policy may erase an inquiry, per class and rule.
func TestRetentionDueAt(t *testing.T) {
	t.Parallel()
	p, err := domain.ParseRetentionPolicy([]byte(`{"classes":{"std":{"archived_for":"30d","closed_for":"10d"},"arch":{"archived_for":"1d"},"keep":{}},
		"default_class":"std","categories":{"billing":"arch","legal":"keep"}}`))
	if err != nil {
		t.Fatal(err)
	}
	noDefault, err := domain.ParseRetentionPolicy([]byte(`{"classes":{"arch":{"archived_for":"1d"}},"categories":{"billing":"arch"}}`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, c := range []struct {
		name   string
		policy *domain.RetentionPolicy
		facts  domain.RetentionFacts
		due    time.Time
		class  string
	}{
		{"open and not archived: never", p, domain.RetentionFacts{Category: "general"}, time.Time{}, "std"},
		{"archived, default class", p, domain.RetentionFacts{Category: "general", ArchivedAt: t0}, t0.Add(30 * day), "std"},
		{"closed, default class", p, domain.RetentionFacts{Category: "general", ClosedAt: t0}, t0.Add(10 * day), "std"},
		{"closed then archived: the earlier rule", p, domain.RetentionFacts{Category: "general", ClosedAt: t0, ArchivedAt: t0.Add(day)}, t0.Add(10 * day), "std"},
		{"mapped category", p, domain.RetentionFacts{Category: "billing", ArchivedAt: t0}, t0.Add(day), "arch"},
		{"mapped class has no closed rule", p, domain.RetentionFacts{Category: "billing", ClosedAt: t0}, time.Time{}, "arch"},
		{"class without rules keeps", p, domain.RetentionFacts{Category: "legal", ArchivedAt: t0, ClosedAt: t0}, time.Time{}, "keep"},
		{"unmapped without a default", noDefault, domain.RetentionFacts{Category: "general", ArchivedAt: t0}, time.Time{}, ""},
	} {
		due, class := c.policy.DueAt(c.facts)
		if !due.Equal(c.due) || class != c.class {
			t.Errorf("%s: DueAt = %v %q, want %v %q", c.name, due, class, c.due, c.class)
		}
	}
	if a, cl := p.Shortest(); a != day || cl != 10*day {
		t.Fatalf("Shortest = %v %v", a, cl)
	}
	b, _ := json.Marshal(domain.RetentionDuration(36 * time.Hour))
	if string(b) != `"36h0m0s"` {
		t.Fatalf("36h marshals as %s", b)
	}
}
