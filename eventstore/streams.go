package eventstore

import (
	"strings"

	"github.com/casebook/casebook/domain"
)

// StreamKind is a category of streams. A stream of a kind is named {kind}-{tenant}, or
// {kind}-{tenant}-{key} for one inquiry's or one List's stream. Every kind that anything appends to
// is one of the constants below: StreamKinds lists them for the backends that filter by category
// (KurrentDB's subscriptions) and for what belongs to a tenant.
type StreamKind string

// The registered stream kinds.
const (
	// KindInquiry is the canonical stream of an inquiry: inquiry-{tenant}-{inquiry}.
	KindInquiry StreamKind = "inquiry"
	// KindSlackProjection is the combined thread and List stream of earlier versions, still read,
	// never written: slackproj-{tenant}-{inquiry}.
	KindSlackProjection StreamKind = "slackproj"
	// KindSlackThread holds what Casebook did to an inquiry's Slack thread.
	KindSlackThread StreamKind = "slackthread"
	// KindSlackList holds an inquiry's Slack List row events.
	KindSlackList StreamKind = "slacklist"
	// KindSlackDue holds an inquiry's reminder replies and escalation posts.
	KindSlackDue StreamKind = "slackdue"
	// KindInstallation is a tenant's Slack installation audit stream: installation-{tenant}.
	KindInstallation StreamKind = "installation"
	// KindListProjection is one Slack List's activation and schema stream:
	// listprojection-{tenant}-{list}.
	KindListProjection StreamKind = "listprojection"
	// KindSLAPolicy is a tenant's SLA policy stream: slapolicy-{tenant}.
	KindSLAPolicy StreamKind = "slapolicy"
	// KindRetentionPolicy is a tenant's retention policy stream: retentionpolicy-{tenant}.
	KindRetentionPolicy StreamKind = "retentionpolicy"
	// KindTenant is reserved for a tenant's own stream (tenant-{tenant}); KurrentDB subscriptions
	// have always included it.
	KindTenant StreamKind = "tenant"
)

var streamKinds = []StreamKind{KindInquiry, KindSlackProjection, KindSlackThread, KindSlackList, KindSlackDue,
	KindInstallation, KindListProjection, KindSLAPolicy, KindRetentionPolicy, KindTenant}

// StreamKinds returns every registered kind.
func StreamKinds() []StreamKind { return append([]StreamKind(nil), streamKinds...) }

// Prefix is what every stream of the kind starts with: the kind and a dash.
func (k StreamKind) Prefix() string { return string(k) + "-" }

// Of reports whether stream is of kind k.
func (k StreamKind) Of(stream string) bool { return strings.HasPrefix(stream, k.Prefix()) }

// Tenant names the tenant-wide stream of kind k: {kind}-{tenant}.
func (k StreamKind) Tenant(tenant domain.TenantID) string { return k.Prefix() + string(tenant) }

// Stream names the stream of kind k for key (an inquiry id, a List id) in tenant:
// {kind}-{tenant}-{key}.
func (k StreamKind) Stream(tenant domain.TenantID, key string) string {
	return k.Prefix() + string(tenant) + "-" + key
}

// KindOf returns the registered kind of stream, or false.
func KindOf(stream string) (StreamKind, bool) {
	for _, k := range streamKinds {
		if k.Of(stream) {
			return k, true
		}
	}
	return "", false
}

// OwnedBy reports whether stream is a registered kind's stream of tenant: {kind}-{tenant} or
// {kind}-{tenant}-{key}. An empty tenant owns nothing.
func OwnedBy(stream string, tenant domain.TenantID) bool {
	k, ok := KindOf(stream)
	if !ok || tenant == "" {
		return false
	}
	rest, ok := strings.CutPrefix(strings.TrimPrefix(stream, k.Prefix()), string(tenant))
	return ok && (rest == "" || rest[0] == '-')
}
