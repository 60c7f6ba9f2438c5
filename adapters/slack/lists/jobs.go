package lists

import (
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
)

// SyncArgs asks for an inquiry's row in List to show at least Version. Unique per tenant +
// inquiry + list + version; the worker applies the newest canonical version, so older jobs coalesce.
type SyncArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	List    string           `json:"list_id"`
	Version uint64           `json:"version"`
}

// Kind implements river.JobArgs: the List row sync effect kind and its queue.
func (SyncArgs) Kind() string { return "slack_list_row_sync" }

// EffectRef implements slackeffects.Args.
func (a SyncArgs) EffectRef() slackeffects.Ref {
	return slackeffects.Ref{Tenant: a.Tenant, Inquiry: a.Inquiry, Destination: a.List, Version: a.Version}
}

// RemoveArgs asks to remove a terminal inquiry's row; scheduled at the terminal transition's time
// + the List's delay. The worker re-checks canonical state when it runs.
type RemoveArgs struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	List    string           `json:"list_id"`
	Version uint64           `json:"version"` // the terminal transition's version
}

// Kind implements river.JobArgs: the List row removal effect kind and its queue.
func (RemoveArgs) Kind() string { return "slack_list_row_remove" }

// EffectRef implements slackeffects.Args.
func (a RemoveArgs) EffectRef() slackeffects.Ref {
	return slackeffects.Ref{Tenant: a.Tenant, Inquiry: a.Inquiry, Destination: a.List, Version: a.Version}
}
