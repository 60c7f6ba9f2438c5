package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/clientaddr"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/tenancy"
)

// PublicConfig configures the public intake, the JSON route and the HTML form alike. Zero fields
// take the defaults.
type PublicConfig struct {
	// MaxBody bounds a submission's body in bytes (default MaxPublicBody); larger is 413.
	MaxBody int64
	// Fields bounds each field in characters after normalization (default: the domain's maxima).
	Fields FieldLimits
	// ClientRate limits submissions per client address (default DefaultClientRate); Off disables it,
	// for loopback load tests.
	ClientRate ratelimit.Rate
	// TenantRate limits submissions per tenant (default DefaultTenantRate).
	TenantRate ratelimit.Rate
	// PortalRate limits authenticated submissions (POST /v1/inquiries) per principal (default
	// DefaultPortalRate).
	PortalRate ratelimit.Rate
	// TrustedProxies are the peers whose X-Forwarded-For is believed. Empty: the connection's
	// address is the client's.
	TrustedProxies []netip.Prefix
	// Now is the rate limiters' clock (default time.Now).
	Now func() time.Time
}

// The default rate limits, in memory per process (see package ratelimit).
var (
	DefaultClientRate = ratelimit.Rate{Events: 10, Per: time.Minute, Burst: 5}
	DefaultTenantRate = ratelimit.Rate{Events: 20, Per: time.Second, Burst: 200}
)

// FieldLimits bound the public fields, in characters (runes). Zero means the domain's maximum; a
// limit above it is refused by ParseFieldLimits, since the domain would refuse the value anyway.
type FieldLimits struct {
	Name, Email, Subject, Message, Category int
}

func (f *FieldLimits) fields() []struct {
	name string
	v    *int
	max  int
} {
	return []struct {
		name string
		v    *int
		max  int
	}{
		{"name", &f.Name, domain.MaxNameLen}, {"email", &f.Email, domain.MaxEmailLen}, {"subject", &f.Subject, domain.MaxSubjectLen},
		{"message", &f.Message, domain.MaxMessageLen}, {"category", &f.Category, domain.MaxCategoryLen},
	}
}

func (f FieldLimits) withDefaults() FieldLimits {
	for _, fl := range f.fields() {
		if *fl.v <= 0 || *fl.v > fl.max {
			*fl.v = fl.max
		}
	}
	return f
}

// String renders the limits as ParseFieldLimits reads them.
func (f FieldLimits) String() string {
	f = f.withDefaults()
	var parts []string
	for _, fl := range f.fields() {
		parts = append(parts, fl.name+"="+strconv.Itoa(*fl.v))
	}
	return strings.Join(parts, ",")
}

// ParseFieldLimits reads "name=100,message=5000"; fields not named keep the domain's maximum.
func ParseFieldLimits(s string) (FieldLimits, error) {
	var f FieldLimits
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(v)
		found := false
		for _, fl := range f.fields() {
			if fl.name == k {
				found = true
				if err != nil || n < 1 || n > fl.max {
					return f, fmt.Errorf("field limit %q: want %s=1..%d", part, k, fl.max)
				}
				*fl.v = n
			}
		}
		if !found {
			return f, fmt.Errorf("field limit %q: unknown field (name, email, subject, message, category)", part)
		}
	}
	return f.withDefaults(), nil
}

// publicState is the resolved configuration and the limiters' state of one Handler.
type publicState struct {
	cfg     PublicConfig
	clients *ratelimit.Keyed
	tenants *ratelimit.Keyed
	// pages limits form page views per client at the submissions' rate: a page reveals whether a
	// tenant exists as an intake does, but viewing it does not spend the client's submissions.
	pages *ratelimit.Keyed
	// portal limits authenticated submissions per principal.
	portal *ratelimit.Keyed
	// secret keys client-address hashes and decoy receipts. It is random per process: both only need
	// to be stable while the in-memory limiters are.
	secret []byte
	decoys decoyKeys
}

// maxDecoyKeys bounds the honeypot keys remembered per process; the oldest is forgotten first.
const maxDecoyKeys = 10000

// decoyKeys remembers which submission each honeypot idempotency key was first used with, so a
// reuse with another body is refused (422) exactly as a real intake's would be.
type decoyKeys struct {
	mu    sync.Mutex
	first map[string]string // keyed key hash → request fingerprint
	order []string
}

// use records fp for key, or reports whether it matches the fingerprint recorded first.
func (d *decoyKeys) use(key, fp string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.first == nil {
		d.first = map[string]string{}
	}
	if prev, ok := d.first[key]; ok {
		return prev == fp
	}
	if len(d.order) >= maxDecoyKeys {
		delete(d.first, d.order[0])
		d.order = d.order[1:]
	}
	d.first[key] = fp
	d.order = append(d.order, key)
	return true
}

func newPublicState(cfg PublicConfig) *publicState {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = MaxPublicBody
	}
	cfg.Fields = cfg.Fields.withDefaults()
	if cfg.ClientRate == (ratelimit.Rate{}) {
		cfg.ClientRate = DefaultClientRate
	}
	if cfg.TenantRate == (ratelimit.Rate{}) {
		cfg.TenantRate = DefaultTenantRate
	}
	if cfg.PortalRate == (ratelimit.Rate{}) {
		cfg.PortalRate = DefaultPortalRate
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &publicState{cfg: cfg, secret: make([]byte, 32)}
	_, _ = rand.Read(p.secret)
	p.clients = ratelimit.New(cfg.ClientRate, cfg.Now)
	p.tenants = ratelimit.New(cfg.TenantRate, cfg.Now)
	p.pages = ratelimit.New(cfg.ClientRate, cfg.Now)
	p.portal = ratelimit.New(cfg.PortalRate, cfg.Now)
	return p
}

// publicInquiry is the documented body of a public submission. Website is a honeypot: the form hides
// it from people; a submission that fills it is answered like any other and recorded nowhere.
type publicInquiry struct {
	Name     string `json:"name"`
	Email    string `json:"email"`
	Subject  string `json:"subject"`
	Message  string `json:"message"`
	Category string `json:"category"`
	Website  string `json:"website"`
}

// LogValue implements slog.LogValuer: the fields are personal data and log as lengths.
func (p publicInquiry) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("name_len", utf8.RuneCountInString(p.Name)), slog.Int("email_len", utf8.RuneCountInString(p.Email)),
		slog.Int("subject_len", utf8.RuneCountInString(p.Subject)), slog.Int("message_len", utf8.RuneCountInString(p.Message)),
		slog.String("category", p.Category), slog.Bool("website_set", p.Website != ""))
}

// normalized applies the one text policy (commands.Normalize) to every field, before the
// configured limits are checked; only the message keeps line breaks and tabs.
func (p publicInquiry) normalized() publicInquiry {
	return publicInquiry{
		Name: commands.Normalize(p.Name, false), Email: commands.Normalize(p.Email, false), Subject: commands.Normalize(p.Subject, false),
		Message: commands.Normalize(p.Message, true), Category: commands.Normalize(p.Category, false), Website: commands.Normalize(p.Website, false),
	}
}

func (f FieldLimits) check(p publicInquiry) error {
	for _, c := range []struct {
		field, v string
		max      int
	}{{"name", p.Name, f.Name}, {"email", p.Email, f.Email}, {"subject", p.Subject, f.Subject}, {"message", p.Message, f.Message}, {"category", p.Category, f.Category}} {
		if utf8.RuneCountInString(c.v) > c.max {
			return domain.Invalid(c.field, "must be at most %d characters", c.max)
		}
	}
	return nil
}

// admitted is a public request that passed admission.
type admitted struct {
	tenant  tenancy.Tenant
	profile tenancy.Profile // read with the tenant, in the same query
	client  string          // keyed hash of the client address
}

// admitPublic applies, cheapest first: the per-client rate limit, the tenant lookup, the tenant's
// origin policy, and the per-tenant rate limit.
func (s *Server) admitPublic(w http.ResponseWriter, r *http.Request) (admitted, error) {
	p := s.public
	a := admitted{client: clientaddr.Key(p.secret, clientaddr.Of(r, p.cfg.TrustedProxies))}
	if ok, retry := p.clients.Allow(a.client); !ok {
		return a, s.limited(w, r, "client_rate_limit", a.client, retry)
	}
	t, origins, profile, err := s.Tenancy.PublicTenant(r.Context(), mux.Vars(r)["tenant_slug"])
	if err != nil {
		return a, err
	}
	a.tenant, a.profile = t, profile
	allowOrigin(w, r, origins) // CORS headers for a trusted origin, on every answer from here on
	if err := originPolicy(origins).Check(r); err != nil {
		s.logPublic(r.Context(), "public intake refused", "cross_origin", a)
		return a, &apiError{http.StatusForbidden, "cross_origin", "cross-origin submissions are accepted only from the tenant's trusted origins"}
	}
	if ok, retry := p.tenants.Allow(string(t.ID)); !ok {
		return a, s.limited(w, r, "tenant_rate_limit", a.client, retry)
	}
	return a, nil
}

// admitPage rate-limits a public page view per client, before the tenant lookup.
func (s *Server) admitPage(w http.ResponseWriter, r *http.Request) error {
	p := s.public
	client := clientaddr.Key(p.secret, clientaddr.Of(r, p.cfg.TrustedProxies))
	if ok, retry := p.pages.Allow(client); !ok {
		return s.limited(w, r, "client_rate_limit", client, retry)
	}
	return nil
}

// originPolicy is the CSRF policy of a tenant's public intake: same-origin and non-browser requests
// (no Sec-Fetch-Site, no Origin) pass, cross-origin browser requests only from trusted origins.
func originPolicy(trusted []string) *http.CrossOriginProtection {
	c := http.NewCrossOriginProtection()
	for _, o := range trusted {
		_ = c.AddTrustedOrigin(o) // stored normalized by tenancy.SetOrigins
	}
	return c
}

func (s *Server) limited(w http.ResponseWriter, r *http.Request, reason, client string, retry time.Duration) error {
	secs := int((retry + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	s.logPublic(r.Context(), "public intake refused", reason, admitted{client: client})
	return &apiError{http.StatusTooManyRequests, "rate_limited", "too many submissions; retry later"}
}

// logPublic logs a refused or dropped public request: the client's keyed hash, never its address.
func (s *Server) logPublic(ctx context.Context, msg, reason string, a admitted) {
	s.logger().InfoContext(ctx, msg, "request_id", requestID(ctx), "reason", reason, "tenant_id", string(a.tenant.ID), "client", a.client)
}

// acceptPublic normalizes and checks a submission, then records it, or, when the honeypot is
// filled, validates it exactly as the domain would and answers a decoy receipt without recording
// anything.
func (s *Server) acceptPublic(r *http.Request, a admitted, in publicInquiry, key string) (string, error) {
	in = in.normalized()
	if err := s.public.cfg.Fields.check(in); err != nil {
		return "", err
	}
	c := commands.Intake{
		Tenant: a.tenant.ID, Source: domain.SourcePublicForm, IdempotencyKey: key,
		Requester: domain.Requester{Name: in.Name, Email: in.Email},
		Subject:   in.Subject, Message: in.Message, Category: in.Category,
		CorrelationID: requestID(r.Context()),
	}
	if in.Website != "" {
		return s.decoy(r.Context(), a, c)
	}
	res, err := s.Commands.Intake(r.Context(), c)
	return res.Receipt, err
}

// decoy answers a honeypot submission: the same validation errors a real one would get, else a
// receipt of the real format, stable per idempotency key within this process, and the real 422
// when a key is reused with another submission. Nothing is appended.
func (s *Server) decoy(ctx context.Context, a admitted, c commands.Intake) (string, error) {
	if err := commands.CheckKey(c.IdempotencyKey); err != nil {
		return "", err
	}
	if _, err := domain.Receive(domain.NewInquiry{ID: "decoy", TenantID: c.Tenant, Source: c.Source, Receipt: "decoy",
		Requester: c.Requester, Subject: c.Subject, Message: c.Message, Category: c.Category}); err != nil {
		return "", err
	}
	var sum []byte
	if c.IdempotencyKey == "" {
		sum = make([]byte, 10)
		_, _ = rand.Read(sum)
	} else {
		m := hmac.New(sha256.New, s.public.secret)
		m.Write([]byte("decoy\x00" + string(c.Tenant) + "\x00" + c.IdempotencyKey))
		sum = m.Sum(nil)
		fp := sha256.Sum256([]byte(strings.Join([]string{c.Requester.Name, c.Requester.Email, c.Subject, c.Message, c.Category}, "\x00")))
		if !s.public.decoys.use(string(sum), string(fp[:])) {
			s.logPublic(ctx, "public intake dropped", "honeypot", a)
			return "", domain.ErrIdempotencyMismatch
		}
	}
	s.logPublic(ctx, "public intake dropped", "honeypot", a)
	return "CB-" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]), nil
}

// publicIntake is POST /v1/public/{tenant_slug}/inquiries.
func (s *Server) publicIntake(w http.ResponseWriter, r *http.Request) {
	var in publicInquiry
	var receipt string
	a, err := s.admitPublic(w, r)
	if err == nil {
		err = decode(w, r, s.public.cfg.MaxBody, &in)
	}
	if err == nil {
		// The tenant's categories bind the JSON route as they bind the form (and the honeypot).
		err = checkCategory(a.profile, commands.Normalize(in.Category, false))
	}
	if err == nil {
		receipt, err = s.acceptPublic(r, a, in, r.Header.Get("Idempotency-Key"))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"receipt": receipt, "status": "received"})
}
