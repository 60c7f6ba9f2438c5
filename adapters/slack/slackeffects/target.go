package slackeffects

import (
	"context"
	"strings"

	"github.com/casebook/casebook/domain"
)

// Target is what one effect writes to: the neutral key of every ledger, guard and health row.
type Target struct {
	Tenant       domain.TenantID
	Installation string // installation key (enterprise/team/app), stable across reinstalls
	Destination  string // channel id, List id, …
	Inquiry      domain.InquiryID
	Kind         string
}

// Key is the target's identity: tenant + installation + destination + inquiry + kind.
func (t Target) Key() string {
	return strings.Join([]string{string(t.Tenant), t.Installation, t.Destination, string(t.Inquiry), t.Kind}, "/")
}

// scope names the target's destination for cooldowns and circuits.
func (t Target) scope() string { return t.Installation + "#" + t.Destination }

// installationScope names the circuit that stops every effect of an installation.
func installationScope(key string) string { return key + "#*" }

// Ref is what the runtime reads of every job's arguments.
type Ref struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	// Destination is set when the arguments fix it (a List); a thread's is resolved when it runs.
	Destination string `json:"destination,omitempty"`
	Version     uint64 `json:"version"`
}

// Loader reads an inquiry's canonical state (commands.Handler.Load).
type Loader func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (*domain.Inquiry, error)
