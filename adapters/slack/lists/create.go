package lists

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

// CreateRequest is what `casebook lists create` supplies.
type CreateRequest struct {
	Tenant    domain.TenantID
	Name      string
	Clearance string
	Team      string // "" projects every team's inquiries
	// Channel, if set, may read the List (access_level read): its members see the board.
	Channel string
	// Viewers are Slack users who may read the List.
	Viewers []string
	// Owner, if set, is the person who owns the List in Slack (access_level owner): someone who can
	// manage it without Casebook. The bot keeps write access. Without it the bot stays the owner.
	Owner string
	// Installation picks one; "" takes the tenant's newest active installation.
	Installation string
	RemoveAfter  time.Duration
}

// Grant is one access level Casebook set on a List. Slack cannot be asked who has access to a List,
// so what Casebook set is recorded (ListAccessGranted) and shown by `lists status`.
type Grant struct {
	Kind   string `json:"kind"` // user or channel
	ID     string `json:"id"`
	Access string `json:"access"` // read or owner
}

// Access is what Casebook set on a List it created.
type Access struct {
	Name   string  `json:"name"`
	Owner  string  `json:"owner,omitempty"` // "" : the bot owns it
	Grants []Grant `json:"grants"`
}

// CreateResult is a created, granted and activated List.
type CreateResult struct {
	List   string `json:"list_id"`
	Access Access `json:"access"`
	Config Config `json:"projection"`
}

// CreateError is a List creation that stopped after slackLists.create: the List exists in Slack
// (Casebook cannot delete it), its projection is registered disabled (no Slack I/O), and Granted
// says which grants were made before Step failed.
type CreateError struct {
	List    string
	Step    string // access or the probe step that failed
	Granted []Grant
	Err     error
}

func (e *CreateError) Error() string {
	return fmt.Sprintf("List %s was created but %s failed: %v; its projection stays disabled. Fix the cause, then run "+
		"`casebook lists activate --list %s` (or delete the List in Slack)", e.List, e.Step, e.Err, e.List)
}

func (e *CreateError) Unwrap() error { return e.Err }

var (
	slackUser    = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	slackChannel = regexp.MustCompile(`^[CG][A-Z0-9]{2,}$`)
)

// maxListName bounds a List's name (Slack documents none; a file title is at most 255 characters).
const maxListName = 255

func (r CreateRequest) validate() error {
	if strings.TrimSpace(r.Name) == "" || utf8.RuneCountInString(r.Name) > maxListName || strings.ContainsAny(r.Name, "\r\n") {
		return domain.Invalid("name", "must be one line of 1 to %d characters", maxListName)
	}
	if r.Channel != "" && !slackChannel.MatchString(r.Channel) {
		return domain.Invalid("channel", "must be a Slack channel id (C… or G…)")
	}
	for _, v := range r.Viewers {
		if !slackUser.MatchString(v) {
			return domain.Invalid("viewer", "%q must be a Slack user id (U… or W…)", v)
		}
	}
	if r.Owner != "" && !slackUser.MatchString(r.Owner) {
		return domain.Invalid("owner", "must be a Slack user id (U… or W…)")
	}
	if r.Owner != "" && slices.Contains(r.Viewers, r.Owner) {
		return domain.Invalid("owner", "is also a viewer: an owner already reads the List")
	}
	return nil
}

// SchemaFor returns the columns Casebook creates a List of clearance cl with: exactly the keyed
// columns Resolve looks for (receipt is the primary column, what people read first), select
// options valued by our own values.
func SchemaFor(cl domain.Classification) []slack.ListColumn {
	names := map[string]string{ColMarker: "Casebook marker", ColReceipt: "Receipt", ColStatus: "Status", ColPriority: "Priority", ColTeam: "Team"}
	var out []slack.ListColumn
	for _, w := range wanted(cl) {
		c := slack.ListColumn{Key: w.key, Name: names[w.key], Type: slack.ListColumnText}
		if w.key == ColReceipt {
			primary := true
			c.IsPrimaryColumn = &primary
		}
		if w.sel {
			c.Type = slack.ListColumnSelect
			c.Options = &slack.ListColumnOptions{}
			for _, v := range w.values {
				c.Options.Choices = append(c.Options.Choices, slack.ListColumnChoice{Value: v, Label: label(v), Color: slack.ListChoiceGray})
			}
		}
		out = append(out, c)
	}
	// The receipt first: Slack shows the primary column first.
	slices.SortStableFunc(out, func(a, b slack.ListColumn) int {
		switch {
		case a.Key == ColReceipt:
			return -1
		case b.Key == ColReceipt:
			return 1
		}
		return 0
	})
	return out
}

func label(v string) string {
	v = strings.ReplaceAll(v, "_", " ")
	if v == "" {
		return v
	}
	return strings.ToUpper(v[:1]) + v[1:]
}

// Create makes a List for tenant with Casebook's keyed columns (slackLists.create), grants read
// access to the channel and the viewers and then ownership to the owner (slackLists.access.set,
// each grant recorded as it is made), and activates the projection with the usual probe.
//
// slackLists.create is not retried: a List has no key Casebook could find it by, so an unknown
// outcome is reported, not repeated. Once the List exists every failure leaves its projection
// registered and disabled (zero Slack I/O), audited with what was granted, and returned as a
// *CreateError naming the List; the probe removes its own row as Activate does.
func (s *Store) Create(ctx context.Context, r CreateRequest) (CreateResult, error) {
	cl, err := slackinstall.ParseClearance(r.Clearance)
	if err != nil {
		return CreateResult{}, err
	}
	if err := r.validate(); err != nil {
		return CreateResult{}, err
	}
	if r.RemoveAfter <= 0 {
		r.RemoveAfter = 24 * time.Hour
	}
	if r.Installation == "" {
		if r.Installation, err = s.Install.NewestInstallation(ctx, r.Tenant); err != nil {
			return CreateResult{}, err
		}
	}
	api, _, err := s.Install.ClientFor(ctx, r.Tenant, r.Installation)
	if err != nil {
		return CreateResult{}, err
	}
	res, err := api.CreateListContext(ctx, r.Name, slack.CreateListOptionSchema(SchemaFor(cl)))
	if err != nil {
		return CreateResult{}, fmt.Errorf("slackLists.create: %w", err)
	}
	list := res.ListID
	acc := Access{Name: r.Name, Grants: []Grant{}}
	ctx = context.WithoutCancel(ctx) // the List exists: record what follows whatever the caller does
	if err := s.exec(ctx, `INSERT INTO slack_list_projections (tenant_id, list_id, team, installation_id, clearance, remove_after_ns, state, access_json, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.Tenant, list, r.Team, r.Installation, r.Clearance, int64(r.RemoveAfter), StateDisabled, mustJSON(acc), s.Now().UnixNano()); err != nil {
		return CreateResult{}, err
	}
	if err := s.audit(ctx, r.Tenant, list, "ListCreated", ListCreated{List: list, Name: r.Name, Clearance: r.Clearance, Team: r.Team,
		InstallationID: r.Installation}); err != nil {
		return CreateResult{}, err
	}
	fail := func(step string, cause error) (CreateResult, error) {
		ce := &CreateError{List: list, Step: step, Granted: acc.Grants, Err: cause}
		return CreateResult{}, errors.Join(ce, s.exec(ctx, `UPDATE slack_list_projections SET last_probe_error = ? WHERE tenant_id = ? AND list_id = ?`,
			ce.Error(), r.Tenant, list))
	}
	var grants []Grant
	if r.Channel != "" {
		grants = append(grants, Grant{Kind: "channel", ID: r.Channel, Access: "read"})
	}
	for _, v := range r.Viewers {
		grants = append(grants, Grant{Kind: "user", ID: v, Access: "read"})
	}
	if r.Owner != "" {
		grants = append(grants, Grant{Kind: "user", ID: r.Owner, Access: "owner"}) // last: the bot stops being owner
	}
	for _, g := range grants {
		opt := slack.SetListAccessOptionUserIDs([]string{g.ID})
		if g.Kind == "channel" {
			opt = slack.SetListAccessOptionChannelIDs([]string{g.ID})
		}
		if err := api.SetListAccessContext(ctx, list, slack.ListAccessLevel(g.Access), opt); err != nil {
			return fail("access", fmt.Errorf("slackLists.access.set %s %s %s: %w", g.Access, g.Kind, g.ID, err))
		}
		acc.Grants = append(acc.Grants, g)
		if g.Access == "owner" {
			acc.Owner = g.ID
		}
		if err := s.exec(ctx, `UPDATE slack_list_projections SET access_json = ? WHERE tenant_id = ? AND list_id = ?`, mustJSON(acc), r.Tenant, list); err != nil {
			return CreateResult{}, err
		}
		if err := s.auditOnce(ctx, r.Tenant, list, fmt.Sprintf("lists:%s:%s:grant:%s:%s:%s", r.Tenant, list, g.Kind, g.ID, g.Access),
			"ListAccessGranted", ListAccessGranted{List: list, Grant: g}); err != nil {
			return CreateResult{}, err
		}
	}
	cfg, err := s.Activate(ctx, ActivateRequest{Tenant: r.Tenant, List: list, Team: r.Team, Clearance: r.Clearance,
		Installation: r.Installation, RemoveAfter: r.RemoveAfter})
	if err != nil {
		var pe *ProbeError
		if errors.As(err, &pe) {
			return fail(pe.Step, err)
		}
		return fail("activation", err)
	}
	return CreateResult{List: list, Access: acc, Config: cfg}, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own plain structs are passed
	}
	return string(b)
}
