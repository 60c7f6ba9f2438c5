package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
)

const slackUsage = `usage:
  casebook slack manifest --public-url https://… [--name N] [--lists]
  casebook slack install --tenant S --token xoxb-… [--signing-secret X] [--app-id A] [--slack-api-url U]
  casebook slack install-link --tenant S [--public-url https://…]
  casebook slack destination --tenant S --channel C [--team T] --clearance public|internal|personal
  casebook slack link-user --tenant S --slack-user U… --principal ID [--installation ID]
  casebook slack unlink-user --tenant S --slack-user U… [--installation ID] [--reason R]
  casebook slack escalation --tenant S (--channel C --clearance public|internal|personal | --clear | --show)`

// slackCmd installs the bot and chooses destinations.
func slackCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(slackUsage)
	}
	if args[0] == "link-user" {
		return slackLinkUser(ctx, args[1:], stdout, stderr)
	}
	if args[0] == "unlink-user" {
		return slackUnlinkUser(ctx, args[1:], stdout, stderr)
	}
	if args[0] == "manifest" {
		return slackManifest(ctx, args[1:], stdout, stderr)
	}
	if args[0] == "escalation" {
		return slackEscalation(ctx, args[1:], stdout, stderr)
	}
	fs, sf := newFlags("slack "+args[0], stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	switch args[0] {
	case "install-link":
		public := fs.String("public-url", envOr("CASEBOOK_PUBLIC_URL", ""), required+"Casebook's public URL, where serve answers /slack/install/… (CASEBOOK_PUBLIC_URL)")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
			l, err := a.SlackOAuth.NewInstallLink(ctx, t, *public, string(cliActor(t).ID))
			if err != nil {
				return err
			}
			return printJSON(stdout, l)
		})
	case "install":
		token := fs.String("token", "", required+"bot token (xoxb-…)")
		signing := fs.String("signing-secret", "", "a signing secret for this installation only (default: the app's, CASEBOOK_SLACK_SIGNING_SECRET, which serve must have too)")
		appID := fs.String("app-id", "", "Slack app id; learned from the token when omitted (then a mismatch is refused)")
		apiURL := fs.String("slack-api-url", envOr("CASEBOOK_SLACK_API_URL", slackinstall.DefaultAPIURL), "Slack Web API base URL (CASEBOOK_SLACK_API_URL)")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
			if a.Slack.AppSigningSecret == "" {
				a.Slack.AppSigningSecret = envOr("CASEBOOK_SLACK_SIGNING_SECRET", "")
			}
			in, err := a.Slack.Install(ctx, slackinstall.InstallRequest{Tenant: t, Token: *token, SigningSecret: *signing, AppID: *appID, APIURL: *apiURL})
			if err != nil {
				return err
			}
			return printJSON(stdout, in)
		})
	case "destination":
		ch := fs.String("channel", "", required+"channel id (C…)")
		team := fs.String("team", "", "team whose inquiries go there (default: the whole tenant)")
		clearance := fs.String("clearance", "", required+"public, internal or personal: the most restricted fields the channel may show")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
			d, err := a.Slack.SetDestination(ctx, slackinstall.DestinationRequest{Tenant: t, Team: *team, Channel: *ch, Clearance: *clearance})
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"destination_id": d.ID, "team": d.Team, "channel": d.Channel,
				"clearance": d.ClearanceStr, "installation_id": d.Installation.ID, "checked": d.Checked})
		})
	}
	return errors.New(slackUsage)
}

const effectsUsage = `usage:
  casebook effects list --tenant S [--state available,retryable,scheduled,discarded,cancelled,completed]
                        [--kind slack_thread_sync,slack_list_row_sync,slack_list_row_remove] [--inquiry ID]
  casebook effects retry|cancel --tenant S --id N
  casebook effects circuits --tenant S
  casebook effects circuit-close --tenant S --channel C|LIST_ID|'*'`

// effectsCmd is manual recovery of Slack effects, always within one tenant.
func effectsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(effectsUsage)
	}
	fs, sf := newFlags("effects "+args[0], stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	states := fs.String("state", "", "comma-separated job states (default: all)")
	id := fs.Int64("id", 0, "effect job id")
	kinds := fs.String("kind", "", "comma-separated effect kinds (default: all)")
	inquiry := fs.String("inquiry", "", "one inquiry's effects")
	ch := fs.String("channel", "", "destination: channel id, List id, or * for an installation's circuit")
	fs.StringVar(ch, "destination", "", "alias of --channel")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	return withTenant(ctx, sf, stderr, *tenant, func(a *app.App, t domain.TenantID) error {
		switch args[0] {
		case "list":
			items, err := a.Effects.Effects(ctx, t, slackeffects.Filter{States: splitList(*states), Kinds: splitList(*kinds),
				Inquiry: domain.InquiryID(*inquiry), Limit: 1000})
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"items": items})
		case "retry", "cancel":
			op := a.Effects.Retry
			if args[0] == "cancel" {
				op = a.Effects.Cancel
			}
			e, err := op(ctx, t, *id)
			if err != nil {
				return err
			}
			return printJSON(stdout, e)
		case "circuits":
			cs, err := a.Effects.Guard.Circuits(ctx, t)
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"items": cs})
		case "circuit-close":
			n, err := a.Effects.Guard.CloseCircuit(ctx, t, *ch)
			if errors.Is(err, domain.ErrNotFound) {
				return fmt.Errorf("no open circuit on destination %q", *ch)
			}
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"closed": n})
		}
		return errors.New(effectsUsage)
	})
}

func withTenant(ctx context.Context, sf *storageFlags, stderr io.Writer, slug string, fn func(*app.App, domain.TenantID) error) error {
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	t, err := a.Tenancy.TenantBySlug(ctx, slug)
	if errors.Is(err, domain.ErrNotFound) {
		return err // it names the tenant
	}
	if err != nil {
		return fmt.Errorf("tenant %q: %w", slug, err)
	}
	return fn(a, t.ID)
}

// devCmd runs development helpers: `casebook dev fake-slack --addr A [--non-marketplace]` serves
// the stateful fake Slack Web API for local demos; --non-marketplace applies the
// conversations.history and conversations.replies limits Slack sets for apps not in the Slack
// Marketplace.
func devCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "fake-slack" {
		return errors.New("usage: casebook dev fake-slack [--addr 127.0.0.1:8090] [--non-marketplace]")
	}
	fs := flag.NewFlagSet("casebook dev fake-slack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	nonMarketplace := fs.Bool("non-marketplace", false, "conversations.history and .replies: at most 15 messages per call, one call a minute (Slack's limits for apps not in the Marketplace)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *addr)
	if err != nil {
		return err
	}
	srv := fakeslack.New(fakeslack.Options{BaseURL: "http://" + ln.Addr().String() + "/api/", AutoCreateChannels: true, NonMarketplace: *nonMarketplace})
	defer srv.Close()
	_ = printJSON(stdout, map[string]string{"api_url": srv.URL(), "token": srv.Token(), "port": strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)})
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// splitList reads a comma-separated flag value ("" is none).
func splitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
