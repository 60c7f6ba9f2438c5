package threads_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
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

// owner is sampleInquiry's owner as Slack names them.
var owner = slackinstall.Person{SlackUser: "U0OWNER001", Name: "Olga Owner"}

// TestRedactionByClearance: a destination receives only the fields its clearance covers; a public
// channel gets no contact details, subject or message text, and no internal ids; the owner is a
// mention, never a principal id.
func TestRedactionByClearance(t *testing.T) {
	t.Parallel()
	personal := []string{"Ada Lovelace", "ada@example.com", "Invoice twice", "Invoice 42 charges me twice."}
	internal := []string{"<@U0OWNER001>", "in_progress"}
	ids := []string{"7f1c-internal-id", "p-owner-1"}
	tests := []struct {
		clearance   domain.Classification
		want, never []string
	}{
		{domain.Public, []string{"CB-RECEIPT42", "billing", "high", "open", "https://cb.example/r/CB-RECEIPT42"}, append(append(ids, personal...), internal...)},
		{domain.Internal, append([]string{"CB-RECEIPT42", "billing"}, internal...), append(ids, personal...)},
		{domain.Personal, append(append([]string{"CB-RECEIPT42"}, internal...), personal...), ids},
	}
	for _, tt := range tests {
		t.Run(tt.clearance.String(), func(t *testing.T) {
			t.Parallel()
			q := sampleInquiry()
			for name, r := range map[string]threads.Rendered{
				"root":  threads.RenderRoot(q, tt.clearance, "https://cb.example/r/"+q.Receipt, owner),
				"reply": threads.RenderReply(q, tt.clearance, owner),
			} {
				var b strings.Builder
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false) // the text as Slack reads it: <@U…> stays a mention
				if err := enc.Encode(r.Blocks); err != nil {
					t.Fatal(err)
				}
				all := r.Text + b.String()
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

// rootActions returns the root message's action ids (a select as id=option,option) and every
// button value.
func rootActions(t *testing.T, q *domain.Inquiry, clearance domain.Classification) (ids, values []string) {
	t.Helper()
	b, err := json.Marshal(threads.RenderRoot(q, clearance, "", owner).Blocks)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Options  []struct {
				Value string `json:"value"`
			} `json:"options"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(b, &blocks); err != nil {
		t.Fatal(err)
	}
	for _, bl := range blocks {
		if bl.Type != "actions" {
			continue
		}
		for _, e := range bl.Elements {
			id := e.ActionID
			if e.Type == "button" {
				values = append(values, e.Value)
			} else {
				var opts []string
				for _, o := range e.Options {
					opts = append(opts, o.Value)
				}
				id += "=" + strings.Join(opts, ",")
			}
			ids = append(ids, id)
		}
	}
	return ids, values
}

// TestRootActionsFitTheState: the root message offers the actions the callbacks handle that make
// sense for the inquiry's status (and owner) as far as the destination may see them; every button
// carries the receipt and the version it was rendered at, every status option the status and
// that version.
func TestRootActionsFitTheState(t *testing.T) {
	t.Parallel()
	const (
		claim, me, resolve, note, remind, assign, cancel = threads.ActionClaim, threads.ActionAssignMe, threads.ActionResolve,
			threads.ActionNote, threads.ActionRemind, threads.ActionAssign, threads.ActionCancel
		status = threads.ActionStatus + "="
	)
	tests := []struct {
		status    domain.Status
		owner     domain.PrincipalID
		clearance domain.Classification
		want      []string
	}{
		{domain.StatusNew, "", domain.Internal, []string{claim, me, status + "triaged", note, remind, assign, cancel}},
		{domain.StatusTriaged, "", domain.Internal, []string{claim, me, status + "in_progress", note, remind, assign, cancel}},
		{domain.StatusInProgress, "p-owner-1", domain.Internal, []string{me, resolve, note, remind, assign, cancel}},
		{domain.StatusInProgress, "", domain.Personal, []string{claim, me, resolve, note, remind, assign, cancel}},
		{domain.StatusWaiting, "p-owner-1", domain.Internal, []string{me, resolve, status + "in_progress", note, remind, assign, cancel}},
		{domain.StatusResolved, "p-owner-1", domain.Internal, []string{status + "in_progress", note}},
		{domain.StatusCancelled, "p-owner-1", domain.Internal, []string{note}},
		// public: neither the exact status nor the owner may show through the actions
		{domain.StatusNew, "", domain.Public, []string{claim, me, resolve, note, remind, assign, cancel}},
		{domain.StatusWaiting, "p-owner-1", domain.Public, []string{claim, me, resolve, note, remind, assign, cancel}},
		{domain.StatusResolved, "p-owner-1", domain.Public, []string{note}},
		{domain.StatusCancelled, "p-owner-1", domain.Public, []string{note}},
	}
	for _, tt := range tests {
		q := sampleInquiry()
		q.Status, q.Owner = tt.status, tt.owner
		ids, values := rootActions(t, q, tt.clearance)
		var want []string
		for _, id := range tt.want {
			if to, ok := strings.CutPrefix(id, status); ok {
				id = status + to + "@v4"
			}
			want = append(want, id)
		}
		if strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Errorf("%s owner=%q at %s: actions %v, want %v", tt.status, tt.owner, tt.clearance, ids, want)
		}
		for _, v := range values {
			if p, ver, ok := slackinstall.ParseActionValue(v); v != q.Receipt+"@v4" || !ok || p != q.Receipt || ver != 4 {
				t.Errorf("%s at %s: button value %q, want the receipt at version 4", tt.status, tt.clearance, v)
			}
		}
	}
}

func TestSealerBindsKeyAndField(t *testing.T) {
	t.Parallel()
	s, err := slackinstall.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
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
	other, _ := slackinstall.NewSealer([]byte("another-instance-secret-32-bytes"))
	if _, err := other.Open(sealed, "inst1/token"); err == nil {
		t.Fatal("opened under another instance secret")
	}
}
