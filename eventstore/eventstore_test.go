package eventstore_test

import (
	"testing"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// TestStreamInquiry: the id comes back only from a stream of the named kind and tenant.
func TestStreamInquiry(t *testing.T) {
	for _, c := range []struct {
		kind   eventstore.StreamKind
		stream string
		tenant domain.TenantID
		want   domain.InquiryID
		ok     bool
	}{
		{"inquiry", eventstore.InquiryStream("t1", "abc-1"), "t1", "abc-1", true},
		{"slackproj", "slackproj-t1-abc", "t1", "abc", true},
		{"inquiry", "inquiry-t1-abc", "t2", "", false},       // another tenant's stream
		{"inquiry", "inquiry-t1x-abc", "t1", "", false},      // tenant is a prefix of another
		{"inquiry", "inquiry-t1-abc", "", "", false},         // no tenant
		{"inquiry", "inquiry-t1-", "t1", "", false},          // no id
		{"inquiry", "slackproj-t1-abc", "t1", "", false},     // another kind
		{"inquiry", "inquiryx-t1-abc", "t1", "", false},      // kind is a prefix of another
		{"slackproj", "inquiry-t1-abc", "t1", "", false},     // another kind
		{"inquiry", "inquiry-t1-a-b-c", "t1", "a-b-c", true}, // ids may hold dashes
	} {
		got, ok := eventstore.StreamInquiry(c.kind, c.stream, c.tenant)
		if got != c.want || ok != c.ok {
			t.Errorf("StreamInquiry(%q, %q, %q) = %q, %v; want %q, %v", c.kind, c.stream, c.tenant, got, ok, c.want, c.ok)
		}
	}
}
