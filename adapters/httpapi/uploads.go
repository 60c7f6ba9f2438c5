package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/ratelimit"
)

// UploadLimits bound what one principal and one tenant may upload (every route that takes files),
// so that one tenant cannot take the process's memory, database writer or bandwidth from the
// others. Zero fields take the defaults; limits are in memory per process, like package ratelimit.
type UploadLimits struct {
	ConcurrentPerPrincipal  int   // uploads in flight per principal
	ConcurrentPerTenant     int   // uploads in flight per tenant
	BytesPerMinutePrincipal int64 // request bytes per principal per minute (also the burst)
	BytesPerMinuteTenant    int64 // request bytes per tenant per minute (also the burst)
}

const (
	// DefaultUploadsPerPrincipal: a person or portal sends files one request at a time; two
	// leaves room for a retry overlapping a slow upload.
	DefaultUploadsPerPrincipal = 2
	// DefaultUploadsPerTenant: each upload holds a chunk buffer and writes to the database; eight
	// per tenant keeps one tenant's burst from holding every writer.
	DefaultUploadsPerTenant = 8
	// DefaultUploadBytesPerPrincipal: two of the largest requests a minute (the default
	// MaxFiles × MaxFileBytes is 100 MiB), so a legitimate upload always fits the burst.
	DefaultUploadBytesPerPrincipal = 256 << 20
	// DefaultUploadBytesPerTenant: four principals' budgets; more is a flood, not a workload.
	DefaultUploadBytesPerTenant = 1 << 30
	// uploadRetryAfter is what a refused concurrent upload is told to wait: about one upload's time.
	uploadRetryAfter = 5 * time.Second
	// meterReadMax caps one metered read, so a take never exceeds the budget's burst.
	meterReadMax = 64 << 10
)

// WithDefaults fills zero limits.
func (l UploadLimits) WithDefaults() UploadLimits {
	if l.ConcurrentPerPrincipal <= 0 {
		l.ConcurrentPerPrincipal = DefaultUploadsPerPrincipal
	}
	if l.ConcurrentPerTenant <= 0 {
		l.ConcurrentPerTenant = DefaultUploadsPerTenant
	}
	if l.BytesPerMinutePrincipal <= 0 {
		l.BytesPerMinutePrincipal = DefaultUploadBytesPerPrincipal
	}
	if l.BytesPerMinuteTenant <= 0 {
		l.BytesPerMinuteTenant = DefaultUploadBytesPerTenant
	}
	return l
}

// uploadGate admits uploads: a counting semaphore per principal and per tenant, and a byte budget
// (a token bucket of bytes) per principal and per tenant, taken as the body is read.
type uploadGate struct {
	lim        UploadLimits
	mu         sync.Mutex
	active     map[string]int
	principals *ratelimit.Keyed
	tenants    *ratelimit.Keyed
}

func newUploadGate(l UploadLimits, now func() time.Time) *uploadGate {
	l = l.WithDefaults()
	byteRate := func(n int64) ratelimit.Rate {
		return ratelimit.Rate{Events: int(n), Per: time.Minute, Burst: int(n)}
	}
	return &uploadGate{lim: l, active: map[string]int{},
		principals: ratelimit.New(byteRate(l.BytesPerMinutePrincipal), now),
		tenants:    ratelimit.New(byteRate(l.BytesPerMinuteTenant), now)}
}

func principalKey(p domain.Principal) string { return string(p.TenantID) + "\x00" + string(p.ID) }

// errUploadBudget: the principal's or tenant's byte budget is spent; the request is refused 429.
var errUploadBudget = errors.New("upload byte budget spent")

func budgetError() error {
	return &apiError{http.StatusTooManyRequests, "upload_rate_limited", "too many bytes uploaded in the last minute; retry later"}
}

func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(int((d+time.Second-1)/time.Second), 1)))
}

// admit takes a concurrency slot for p and its tenant (429 with Retry-After when either is full)
// and, for a body of known length, takes that length from both byte budgets at once (429 with
// Retry-After when it does not fit now, 413 when it never can); release gives the slot back.
func (g *uploadGate) admit(w http.ResponseWriter, r *http.Request, p domain.Principal) (release func(), err error) {
	pk, tk := principalKey(p), string(p.TenantID)
	g.mu.Lock()
	if g.active[pk] >= g.lim.ConcurrentPerPrincipal || g.active[tk+"\x00"] >= g.lim.ConcurrentPerTenant {
		g.mu.Unlock()
		setRetryAfter(w, uploadRetryAfter)
		return nil, &apiError{http.StatusTooManyRequests, "too_many_uploads", "too many uploads in progress; retry later"}
	}
	g.active[pk]++
	g.active[tk+"\x00"]++
	g.mu.Unlock()
	release = func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, k := range []string{pk, tk + "\x00"} {
			if g.active[k]--; g.active[k] <= 0 {
				delete(g.active, k)
			}
		}
	}
	n := r.ContentLength
	if n > min(g.lim.BytesPerMinutePrincipal, g.lim.BytesPerMinuteTenant) {
		release()
		return nil, &apiError{http.StatusRequestEntityTooLarge, "body_too_large", "the upload exceeds the bytes a principal may upload per minute"}
	}
	if retry, ok := g.take(p, int(max(n, 1))); !ok {
		release()
		setRetryAfter(w, retry)
		return nil, budgetError()
	}
	return release, nil
}

// take spends n bytes of p's and its tenant's budgets.
func (g *uploadGate) take(p domain.Principal, n int) (time.Duration, bool) {
	if ok, retry := g.principals.AllowN(principalKey(p), n); !ok {
		return retry, false
	}
	if ok, retry := g.tenants.AllowN(string(p.TenantID), n); !ok {
		return retry, false
	}
	return 0, true
}

// meter wraps the body of r so that every byte read beyond what admit took is taken from p's
// budgets (a body of unknown length, sent chunked, is metered as it streams); once one is spent,
// reads fail with errUploadBudget and Retry-After is set.
func (g *uploadGate) meter(w http.ResponseWriter, r *http.Request, p domain.Principal, body io.ReadCloser) io.ReadCloser {
	return &meteredBody{ReadCloser: body, g: g, p: p, w: w, paid: max(r.ContentLength, 1)}
}

type meteredBody struct {
	io.ReadCloser
	g    *uploadGate
	p    domain.Principal
	w    http.ResponseWriter
	paid int64 // bytes admit took
}

func (m *meteredBody) Read(b []byte) (int, error) {
	if len(b) > meterReadMax {
		b = b[:meterReadMax]
	}
	n, err := m.ReadCloser.Read(b)
	owed := n
	if m.paid > 0 {
		covered := min(int64(n), m.paid)
		m.paid -= covered
		owed -= int(covered)
	}
	if owed > 0 {
		if retry, ok := m.g.take(m.p, owed); !ok {
			setRetryAfter(m.w, retry)
			return 0, errUploadBudget
		}
	}
	return n, err
}
