package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/casebook/casebook/adapters/console"
	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/internal/clientaddr"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/tenancy"
)

// publicFlags adds the public intake's limits to serve's flags, each with a CASEBOOK_* default, and
// returns a function that resolves them after parsing.
func publicFlags(fs *flag.FlagSet) func() (httpapi.PublicConfig, error) {
	d := httpapi.DefaultClientRate
	t := httpapi.DefaultTenantRate
	maxBody := fs.String("intake-max-body", envOr("CASEBOOK_INTAKE_MAX_BODY", strconv.Itoa(httpapi.MaxPublicBody)),
		"largest public submission body in bytes; larger is 413 (CASEBOOK_INTAKE_MAX_BODY)")
	fields := fs.String("intake-field-limits", envOr("CASEBOOK_INTAKE_FIELD_LIMITS", httpapi.FieldLimits{}.String()),
		"characters allowed per public field, at most the domain's maxima (CASEBOOK_INTAKE_FIELD_LIMITS)")
	clientRate := fs.String("intake-rate-limit", envOr("CASEBOOK_INTAKE_RATE_LIMIT", ratelimit.Rate{Events: d.Events, Per: d.Per}.String()),
		"public submissions per client address: N/s, N/m, N/h or off (CASEBOOK_INTAKE_RATE_LIMIT)")
	clientBurst := fs.String("intake-rate-burst", envOr("CASEBOOK_INTAKE_RATE_BURST", strconv.Itoa(d.Burst)),
		"burst allowed per client address (CASEBOOK_INTAKE_RATE_BURST)")
	tenantRate := fs.String("intake-tenant-rate-limit", envOr("CASEBOOK_INTAKE_TENANT_RATE_LIMIT", ratelimit.Rate{Events: t.Events, Per: t.Per}.String()),
		"public submissions per tenant: N/s, N/m, N/h or off (CASEBOOK_INTAKE_TENANT_RATE_LIMIT)")
	tenantBurst := fs.String("intake-tenant-rate-burst", envOr("CASEBOOK_INTAKE_TENANT_RATE_BURST", strconv.Itoa(t.Burst)),
		"burst allowed per tenant (CASEBOOK_INTAKE_TENANT_RATE_BURST)")
	pr := httpapi.DefaultPortalRate
	portalRate := fs.String("portal-rate-limit", envOr("CASEBOOK_PORTAL_RATE_LIMIT", ratelimit.Rate{Events: pr.Events, Per: pr.Per}.String()),
		"authenticated submissions (POST /v1/inquiries) per principal: N/s, N/m, N/h or off (CASEBOOK_PORTAL_RATE_LIMIT)")
	portalBurst := fs.String("portal-rate-burst", envOr("CASEBOOK_PORTAL_RATE_BURST", strconv.Itoa(pr.Burst)),
		"burst allowed per principal (CASEBOOK_PORTAL_RATE_BURST)")
	proxies := fs.String("trusted-proxies", envOr("CASEBOOK_TRUSTED_PROXIES", ""),
		"comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed; empty: none (CASEBOOK_TRUSTED_PROXIES)")
	return func() (httpapi.PublicConfig, error) {
		var cfg httpapi.PublicConfig
		var err error
		if cfg.MaxBody, err = strconv.ParseInt(*maxBody, 10, 64); err != nil || cfg.MaxBody < 1 {
			return cfg, fmt.Errorf("--intake-max-body %q: want a positive number of bytes", *maxBody)
		}
		if cfg.Fields, err = httpapi.ParseFieldLimits(*fields); err != nil {
			return cfg, fmt.Errorf("--intake-field-limits: %w", err)
		}
		if cfg.ClientRate, err = rateWithBurst("--intake-rate", *clientRate, *clientBurst); err != nil {
			return cfg, err
		}
		if cfg.TenantRate, err = rateWithBurst("--intake-tenant-rate", *tenantRate, *tenantBurst); err != nil {
			return cfg, err
		}
		if cfg.PortalRate, err = rateWithBurst("--portal-rate", *portalRate, *portalBurst); err != nil {
			return cfg, err
		}
		if cfg.TrustedProxies, err = clientaddr.ParseTrustedProxies(*proxies); err != nil {
			return cfg, fmt.Errorf("--trusted-proxies: %w", err)
		}
		return cfg, nil
	}
}

func rateWithBurst(name, spec, burst string) (ratelimit.Rate, error) {
	r, err := ratelimit.ParseRate(spec)
	if err != nil {
		return r, fmt.Errorf("%s-limit: %w", name, err)
	}
	if r.Off {
		return r, nil
	}
	if r.Burst, err = strconv.Atoi(burst); err != nil || r.Burst < 1 {
		return r, fmt.Errorf("%s-burst %q: want a positive number", name, burst)
	}
	return r, nil
}

// consoleFlags adds the console's sign-in limit to serve's flags.
func consoleFlags(fs *flag.FlagSet) func() (ratelimit.Rate, error) {
	d := console.DefaultSignInRate
	spec := fs.String("console-signin-rate", envOr("CASEBOOK_CONSOLE_SIGNIN_RATE", ratelimit.Rate{Events: d.Events, Per: d.Per}.String()),
		"console sign-in attempts per client address: N/s, N/m, N/h (burst N) or off (CASEBOOK_CONSOLE_SIGNIN_RATE)")
	return func() (ratelimit.Rate, error) {
		r, err := ratelimit.ParseRate(*spec)
		if err != nil {
			return r, fmt.Errorf("--console-signin-rate: %w", err)
		}
		r.Burst = r.Events
		return r, nil
	}
}

// tenantCacheFlag adds --tenant-cache-ttl (serve, bench); the returned function sets it on the
// configuration after parsing. 0 turns the cache off.
func tenantCacheFlag(fs *flag.FlagSet) func(*app.Config) error {
	spec := fs.String("tenant-cache-ttl", envOr("CASEBOOK_TENANT_CACHE_TTL", tenancy.DefaultPublicCacheTTL.String()),
		"how long the public routes serve a tenant, its trusted origins and profile from memory; "+
			"changes from other processes are seen within it; 0: read every time (CASEBOOK_TENANT_CACHE_TTL)")
	return func(cfg *app.Config) error {
		d, err := time.ParseDuration(*spec)
		if err != nil || d < 0 {
			return fmt.Errorf("--tenant-cache-ttl %q: want a duration such as 1s, or 0 for no cache", *spec)
		}
		cfg.TenantCacheTTL = d
		if d == 0 {
			cfg.TenantCacheTTL = -1 // app.Config: negative is off, zero the default
		}
		return nil
	}
}
