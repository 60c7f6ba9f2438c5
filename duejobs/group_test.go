package duejobs

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/domain"
)

// TestByInquiryKeepsClaimOrder: a tick runs one inquiry's jobs on one worker in claim order, so
// they never race each other for the stream's next revision.
func TestByInquiryKeepsClaimOrder(t *testing.T) {
	t.Parallel()
	j := func(id, tenant, inquiry string) Job {
		return Job{ID: id, Tenant: domain.TenantID(tenant), Inquiry: domain.InquiryID(inquiry)}
	}
	jobs := []Job{j("1", "t", "a"), j("2", "t", "b"), j("3", "t", "a"), j("4", "u", "a"), j("5", "t", "b")}
	var got [][]string
	for _, g := range byInquiry(jobs) {
		var ids []string
		for _, x := range g {
			ids = append(ids, x.ID)
		}
		got = append(got, ids)
	}
	want := [][]string{{"1", "3"}, {"2", "5"}, {"4"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("groups (-want +got):\n%s", diff)
	}
}
