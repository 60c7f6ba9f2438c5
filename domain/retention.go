package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RetentionPolicy is a tenant's retention policy: named classes, each with how long an inquiry may
// stay archived and how long it may stay closed (resolved or cancelled) before the policy job
// erases it, and which class each category falls in. The JSON shape operators write:
//
//	{"classes":{"standard":{"archived_for":"90d","closed_for":"730d"},"contracts":{"archived_for":"3650d"}},
//	 "default_class":"standard","categories":{"billing":"contracts"}}
//
// Durations are whole days ("90d") or Go durations ("36h"). A class without a rule keeps its
// inquiries; an inquiry whose category names no class and with no default_class is never erased
// by the policy. A legal hold always wins over the policy.
type RetentionPolicy struct {
	Classes      map[string]RetentionClass `json:"classes"`
	DefaultClass string                    `json:"default_class,omitempty"`
	Categories   map[string]string         `json:"categories,omitempty"`
}

// RetentionClass is one class's rules; a zero rule does not apply.
type RetentionClass struct {
	ArchivedFor RetentionDuration `json:"archived_for,omitzero"`
	ClosedFor   RetentionDuration `json:"closed_for,omitzero"`
}

// RetentionDuration is a duration written as whole days ("90d") or in Go syntax ("36h").
type RetentionDuration time.Duration

// MarshalJSON implements json.Marshaler: whole days as "Nd", others in Go syntax.
func (d RetentionDuration) MarshalJSON() ([]byte, error) {
	if v := time.Duration(d); v%(24*time.Hour) == 0 {
		return json.Marshal(strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d")
	}
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *RetentionDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a retention duration is a string like \"90d\" or \"36h\"")
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > int64(MaxRetention/(24*time.Hour)) {
			return fmt.Errorf("bad retention duration %q (whole days such as \"90d\")", s)
		}
		*d = RetentionDuration(time.Duration(n) * 24 * time.Hour)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("bad retention duration %q (whole days such as \"90d\" or a Go duration such as \"36h\")", s)
	}
	*d = RetentionDuration(v)
	return nil
}

// MinRetention is the shortest rule a policy may set: an hour, so a typo cannot erase at once.
const MinRetention = time.Hour

var classNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// MaxRetentionClasses bounds a policy's classes and category mappings.
const MaxRetentionClasses = 200

// ParseRetentionPolicy decodes and validates a policy strictly: unknown fields, class names that
// are not slugs, rules outside [MinRetention, MaxRetention], a default class or category mapping
// naming no class, and an empty class set are validation errors.
func ParseRetentionPolicy(b []byte) (*RetentionPolicy, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p RetentionPolicy
	if err := dec.Decode(&p); err != nil {
		return nil, Invalid("policy", "%v", err)
	}
	if dec.More() {
		return nil, Invalid("policy", "trailing data after the JSON object")
	}
	if len(p.Classes) == 0 {
		return nil, Invalid("classes", "name at least one retention class")
	}
	if len(p.Classes) > MaxRetentionClasses || len(p.Categories) > MaxRetentionClasses {
		return nil, Invalid("classes", "at most %d classes and %d category mappings", MaxRetentionClasses, MaxRetentionClasses)
	}
	for name, c := range p.Classes {
		if !classNameRE.MatchString(name) {
			return nil, Invalid("classes", "class name %q is not a slug (a-z, 0-9, _ and -, up to 40)", name)
		}
		for rule, d := range map[string]RetentionDuration{"archived_for": c.ArchivedFor, "closed_for": c.ClosedFor} {
			if d != 0 && (time.Duration(d) < MinRetention || time.Duration(d) > MaxRetention) {
				return nil, Invalid("classes", "%s.%s must be between %s and %d days", name, rule, MinRetention, MaxRetention/(24*time.Hour))
			}
		}
	}
	if _, ok := p.Classes[p.DefaultClass]; p.DefaultClass != "" && !ok {
		return nil, Invalid("default_class", "%q is not a class of the policy", p.DefaultClass)
	}
	for cat, class := range p.Categories {
		if _, ok := p.Classes[class]; !ok {
			return nil, Invalid("categories", "category %q maps to %q, which is not a class of the policy", cat, class)
		}
		if cat == "" || len(cat) > MaxCategoryLen {
			return nil, Invalid("categories", "a category is 1 to %d bytes", MaxCategoryLen)
		}
	}
	return &p, nil
}

// Encode returns the policy's canonical JSON.
func (p *RetentionPolicy) Encode() []byte {
	b, _ := json.Marshal(p)
	return b
}

// ClassOf returns the class an inquiry of category falls in ("" when none).
func (p *RetentionPolicy) ClassOf(category string) string {
	if c, ok := p.Categories[category]; ok {
		return c
	}
	return p.DefaultClass
}

// RetentionFacts are what the policy looks at: an inquiry's category and when it was archived
// and closed (zero: it is not).
type RetentionFacts struct {
	Category   string
	ArchivedAt time.Time
	ClosedAt   time.Time
}

// FactsOf returns q's retention facts.
func FactsOf(q *Inquiry) RetentionFacts {
	f := RetentionFacts{Category: q.Category, ClosedAt: q.ClosedAt}
	if q.Archived {
		f.ArchivedAt = q.ArchivedAt
	}
	return f
}

// DueAt returns when the policy may erase an inquiry with facts f, and the class whose rule says
// so; a zero time means never (no class, no applicable rule, not archived nor closed).
func (p *RetentionPolicy) DueAt(f RetentionFacts) (time.Time, string) {
	class := p.ClassOf(f.Category)
	c, ok := p.Classes[class]
	if !ok {
		return time.Time{}, ""
	}
	var due time.Time
	if c.ArchivedFor != 0 && !f.ArchivedAt.IsZero() {
		due = f.ArchivedAt.Add(time.Duration(c.ArchivedFor))
	}
	if c.ClosedFor != 0 && !f.ClosedAt.IsZero() {
		if t := f.ClosedAt.Add(time.Duration(c.ClosedFor)); due.IsZero() || t.Before(due) {
			due = t
		}
	}
	if due.IsZero() {
		return time.Time{}, class
	}
	return due.UTC(), class
}

// Shortest returns the shortest archived and closed rules of the policy (zero: no class has one):
// no inquiry archived or closed more recently than that can be due.
func (p *RetentionPolicy) Shortest() (archived, closed time.Duration) {
	names := make([]string, 0, len(p.Classes))
	for n := range p.Classes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := p.Classes[n]
		if a := time.Duration(c.ArchivedFor); a != 0 && (archived == 0 || a < archived) {
			archived = a
		}
		if d := time.Duration(c.ClosedFor); d != 0 && (closed == 0 || d < closed) {
			closed = d
		}
	}
	return archived, closed
}

// RetentionPolicySet replaces a tenant's retention policy (stream retentionpolicy-{tenant}). Policy
// is the canonical JSON of a RetentionPolicy; the policy job applies the current one at every sweep.
type RetentionPolicySet struct {
	Policy json.RawMessage `json:"policy"`
}

// EventType implements Event.
func (RetentionPolicySet) EventType() string { return "RetentionPolicySet" }

func init() { decoders["RetentionPolicySet"] = decodeAs[RetentionPolicySet] }

// RetentionActor is the principal the retention policy job erases as: system:retention, with the
// admin role erasure requires.
func RetentionActor(tenant TenantID) Principal {
	return Principal{ID: "system:retention", TenantID: tenant, Name: "retention", Role: RoleAdmin}
}
