package slackinstall_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

// TestPersonText: a linked Slack user is a mention at any clearance; a display name shows only
// where personal data is cleared, escaped; a malformed Slack id is never rendered as a mention.
func TestPersonText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p         slackinstall.Person
		clearance domain.Classification
		want      string
	}{
		{slackinstall.Person{SlackUser: "U0OLGA0001", Name: "Olga"}, domain.Public, "<@U0OLGA0001>"},
		{slackinstall.Person{SlackUser: "W0ENTERPRISE", Name: "Olga"}, domain.Internal, "<@W0ENTERPRISE>"},
		{slackinstall.Person{Name: "Olga"}, domain.Internal, ""},
		{slackinstall.Person{Name: "Olga & <Co>"}, domain.Personal, "Olga &amp; &lt;Co&gt;"},
		{slackinstall.Person{SlackUser: "U0X><!channel", Name: "Olga"}, domain.Internal, ""},
		{slackinstall.Person{}, domain.Personal, ""},
	}
	for _, tt := range tests {
		if got := tt.p.Text(tt.clearance); got != tt.want {
			t.Errorf("%+v at %s = %q, want %q", tt.p, tt.clearance, got, tt.want)
		}
	}
}

// TestActionValue: a value carries its payload and version within the limit it is given (a long
// payload is cut, the version kept); a value without a version (an older message) parses as
// unversioned with its payload intact.
func TestActionValue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		payload string
		version uint64
		max     int
	}{
		{"CB-7K3M-Q9", 7, slackinstall.MaxActionValue},
		{"in_progress", 18446744073709551615, slackinstall.MaxOptionValue},
		{"a@v9@b", 3, slackinstall.MaxActionValue},
		{strings.Repeat("é", 3000), 42, slackinstall.MaxActionValue},
	} {
		v := slackinstall.ActionValue(tt.payload, tt.version, tt.max)
		if utf8.RuneCountInString(v) > tt.max {
			t.Errorf("%q: %d characters, limit %d", v[:20], utf8.RuneCountInString(v), tt.max)
		}
		p, ver, ok := slackinstall.ParseActionValue(v)
		if !ok || ver != tt.version || (len(tt.payload) < 100 && p != tt.payload) {
			t.Errorf("ParseActionValue(%q) = %q %d %v", v, p, ver, ok)
		}
	}
	for _, old := range []string{"CB-7K3M-Q9", "in_progress", "x@v", "x@vabc", "x@v0"} {
		if p, _, ok := slackinstall.ParseActionValue(old); ok || p != old {
			t.Errorf("unversioned %q parsed as %q, versioned %v", old, p, ok)
		}
	}
}
