package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/tenancy"
)

// defaultTokenTTL is the lifetime of every token the CLI mints unless --ttl says otherwise: 90 days,
// so a forgotten token stops working by itself. --ttl 0 mints a token that never expires.
const defaultTokenTTL = 90 * 24 * time.Hour

// ttlFlag adds --ttl (CASEBOOK_TOKEN_TTL) to fs.
func ttlFlag(fs *flag.FlagSet) *time.Duration {
	def := defaultTokenTTL
	if v := envOr("CASEBOOK_TOKEN_TTL", ""); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		}
	}
	return fs.Duration("ttl", def, "lifetime of the minted token, 0 for no expiry (CASEBOOK_TOKEN_TTL)")
}

// tokenJSON describes a freshly minted token; the secret is printed once.
func tokenJSON(ctx context.Context, a *app.App, tenant domain.TenantID, token string) (map[string]any, error) {
	info, err := a.Tenancy.TokenInfo(ctx, tenant, tenancy.TokenID(token))
	if err != nil {
		return nil, err
	}
	return map[string]any{"token_id": info.ID, "expires_at": info.ExpiresAt}, nil
}

func tokens(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: casebook tokens create --tenant S --principal ID [--ttl D] | revoke --tenant S (--id TOKEN_ID | --principal ID) | list --tenant S [--principal ID]"
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs, sf := newFlags("tokens "+args[0], stderr)
	tenant := fs.String("tenant", "", required+"tenant slug")
	var principal *string
	var ttl *time.Duration
	var id *string
	switch args[0] {
	case "create":
		principal = fs.String("principal", "", required+"principal id (principals create prints it)")
		ttl = ttlFlag(fs)
	case "revoke":
		principal = fs.String("principal", "", "principal id: revoke all of its tokens")
		id = fs.String("id", "", "token id (tok_…), as printed when it was minted or by tokens list")
	case "list":
		principal = fs.String("principal", "", "principal id: only its tokens")
	default:
		return errors.New(usage)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	switch args[0] {
	case "create":
		info, token, err := a.Tenancy.CreateToken(ctx, *tenant, domain.PrincipalID(*principal), *ttl)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"token_id": info.ID, "principal_id": info.PrincipalID, "token": token, "expires_at": info.ExpiresAt})
	case "revoke":
		switch {
		case *id != "" && *principal == "":
			if err := a.Tenancy.RevokeToken(ctx, *tenant, *id); err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"revoked": []string{*id}})
		case *id == "" && *principal != "":
			n, err := a.Tenancy.RevokePrincipalTokens(ctx, *tenant, domain.PrincipalID(*principal))
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"principal_id": *principal, "revoked_count": n})
		}
		return errors.New("tokens revoke: give exactly one of --id and --principal")
	}
	list, err := a.Tenancy.Tokens(ctx, *tenant, domain.PrincipalID(*principal))
	if err != nil {
		return err
	}
	if list == nil {
		list = []tenancy.TokenInfo{}
	}
	return printJSON(stdout, map[string]any{"items": list})
}

// originList collects a repeatable --origin flag.
type originList []string

func (o *originList) String() string { return strings.Join(*o, ",") }

func (o *originList) Set(v string) error { *o = append(*o, v); return nil }

// setOrigins replaces a tenant's trusted browser origins for the public intake.
func setOrigins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("tenants set-origins", stderr)
	slug := fs.String("slug", "", required+"tenant slug")
	var origins originList
	fs.Var(&origins, "origin", "a trusted origin such as https://www.example.com (repeat for several; none clears the list)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tenants set-origins: unexpected argument %q", fs.Arg(0))
	}
	a, err := sf.open(ctx, logger(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	got, err := a.Tenancy.SetOrigins(ctx, *slug, origins)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"slug": *slug, "origins": got})
}
