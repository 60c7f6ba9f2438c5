package slackproj_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/slackproj"
	"github.com/casebook/casebook/domain"
)

func sampleInquiry() *domain.Inquiry {
	return &domain.Inquiry{
		ID: "7f1c-internal-id", TenantID: "t1", Receipt: "CB-RECEIPT42", Status: domain.StatusInProgress,
		Priority: domain.PriorityHigh, Category: "billing", Owner: "p-owner-1", Team: "support",
		Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"},
		Subject:   "Invoice twice", Message: "Invoice 42 charges me twice.", Version: 4,
	}
}

// TestRedactionByClearance: a destination receives only the fields its clearance covers; a public
// channel gets no contact details, subject or message text, and no internal ids.
func TestRedactionByClearance(t *testing.T) {
	t.Parallel()
	personal := []string{"Ada Lovelace", "ada@example.com", "Invoice twice", "Invoice 42 charges me twice."}
	internal := []string{"p-owner-1", "in_progress"}
	tests := []struct {
		clearance   domain.Classification
		want, never []string
	}{
		{domain.Public, []string{"CB-RECEIPT42", "billing", "high", "open", "https://cb.example/r/CB-RECEIPT42"}, append(append([]string{"7f1c-internal-id"}, personal...), internal...)},
		{domain.Internal, append([]string{"CB-RECEIPT42", "billing"}, internal...), append([]string{"7f1c-internal-id"}, personal...)},
		{domain.Personal, append(append([]string{"CB-RECEIPT42"}, internal...), personal...), []string{"7f1c-internal-id"}},
	}
	for _, tt := range tests {
		t.Run(tt.clearance.String(), func(t *testing.T) {
			t.Parallel()
			q := sampleInquiry()
			for name, r := range map[string]slackproj.Rendered{
				"root":  slackproj.RenderRoot(q, tt.clearance, "https://cb.example/r/"+q.Receipt),
				"reply": slackproj.RenderReply(q, tt.clearance),
			} {
				b, err := json.Marshal(r.Blocks)
				if err != nil {
					t.Fatal(err)
				}
				all := r.Text + string(b)
				for _, s := range tt.never {
					if strings.Contains(all, s) {
						t.Errorf("%s at %s clearance leaks %q", name, tt.clearance, s)
					}
				}
				if name != "root" {
					continue
				}
				for _, s := range tt.want {
					if !strings.Contains(all, s) {
						t.Errorf("root at %s clearance lacks %q", tt.clearance, s)
					}
				}
			}
		})
	}
}

// TestRootButtonsCarryOnlyAnOpaqueReference: action values are the receipt, never an internal id.
func TestRootButtonsCarryOnlyAnOpaqueReference(t *testing.T) {
	t.Parallel()
	r := slackproj.RenderRoot(sampleInquiry(), domain.Personal, "")
	b, _ := json.Marshal(r.Blocks)
	if !strings.Contains(string(b), slackproj.ActionClaim) || !strings.Contains(string(b), slackproj.ActionResolve) {
		t.Fatalf("no claim/resolve buttons: %s", b)
	}
	if strings.Contains(string(b), "7f1c-internal-id") {
		t.Fatalf("internal id in blocks: %s", b)
	}
	q := sampleInquiry()
	q.Status = domain.StatusCancelled
	b, _ = json.Marshal(slackproj.RenderRoot(q, domain.Personal, "").Blocks)
	if strings.Contains(string(b), slackproj.ActionClaim) {
		t.Fatal("buttons on a closed inquiry")
	}
}

func TestSealerBindsKeyAndField(t *testing.T) {
	t.Parallel()
	s, err := slackproj.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal("xoxb-secret", "inst1/token")
	if strings.Contains(sealed, "xoxb") {
		t.Fatal("plaintext visible")
	}
	if got, err := s.Open(sealed, "inst1/token"); err != nil || got != "xoxb-secret" {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := s.Open(sealed, "inst2/token"); err == nil {
		t.Fatal("opened under another installation's aad")
	}
	other, _ := slackproj.NewSealer([]byte("another-instance-secret-32-bytes"))
	if _, err := other.Open(sealed, "inst1/token"); err == nil {
		t.Fatal("opened under another instance secret")
	}
}
