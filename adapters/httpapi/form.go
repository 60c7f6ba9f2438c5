package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"html/template"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/tenancy"
)

// publicRoutes registers the public intake: the JSON route and the HTML form, which shares its
// admission (rate limits, origin policy), limits, normalization and honeypot.
func (s *Server) publicRoutes(r *mux.Router) {
	r.HandleFunc("/v1/public/{tenant_slug}/inquiries", s.publicIntake).Methods(http.MethodPost)
	r.HandleFunc("/v1/public/{tenant_slug}/inquiries", s.publicPreflight).Methods(http.MethodOptions)
	r.HandleFunc("/f/{tenant_slug}", s.formPage).Methods(http.MethodGet)
	r.HandleFunc("/f/{tenant_slug}", s.formSubmit).Methods(http.MethodPost)
}

// formCSS is the form's only style; the Content-Security-Policy allows exactly it, by hash.
const formCSS = `body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}` +
	`label{display:block;margin-top:1rem}input,textarea,select{width:100%;box-sizing:border-box;padding:.4rem;font:inherit}` +
	`button{margin-top:1rem;padding:.5rem 1.5rem}.error{color:#a00}` +
	`.hp{position:absolute;left:-10000px;width:1px;height:1px;overflow:hidden}`

var formCSP = func() string {
	sum := sha256.Sum256([]byte(formCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}()

var formTemplate = template.Must(template.New("form").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title><style>` + formCSS + `</style></head>
<body><main>
{{- if eq .Page "form"}}
<h1>{{.Title}}</h1>
{{with .Error}}<p class="error" id="error" role="alert">{{.}}</p>{{end}}
<form method="post" action="/f/{{.Slug}}" accept-charset="utf-8">
<input type="hidden" name="idempotency_key" value="{{.Key}}">
<label for="name">Name</label>
<input id="name" name="name" maxlength="{{.Limits.Name}}" autocomplete="name" value="{{.In.Name}}">
<label for="email">Email</label>
<input id="email" name="email" type="email" required maxlength="{{.Limits.Email}}" autocomplete="email" value="{{.In.Email}}">
<label for="subject">Subject</label>
<input id="subject" name="subject" required maxlength="{{.Limits.Subject}}" value="{{.In.Subject}}">
{{- if .KeepCategory}}{{with .In.Category}}<input type="hidden" name="category" value="{{.}}">{{end}}
{{- else if .Categories}}
<label for="category">Category</label>
<select id="category" name="category" required>
<option value="">Choose…</option>
{{- range .Categories}}<option value="{{.Slug}}"{{if eq .Slug $.In.Category}} selected{{end}}>{{.Label}}</option>{{end}}
</select>
{{- end}}
<label for="message">Message</label>
<textarea id="message" name="message" required rows="8" maxlength="{{.Limits.Message}}">{{.In.Message}}</textarea>
<div class="hp" aria-hidden="true"><label for="website">Website (leave empty)</label>
<input id="website" name="website" tabindex="-1" autocomplete="off"></div>
<button type="submit" id="submit">Send</button>
</form>
{{- else if eq .Page "receipt"}}
<h1>Thank you</h1>
<p>We received your inquiry. Your receipt is <strong id="receipt">{{.Receipt}}</strong>.</p>
{{- else}}
<h1>{{.Title}}</h1>
<p class="error" id="error" role="alert">{{.Error}}</p>
{{- end}}
</main></body></html>
`))

// formView is what the template renders. In holds the submitted values on a re-render (escaped by
// html/template); the honeypot is never echoed.
type formView struct {
	Page, Title, Slug, Key, Receipt, Error string
	In                                     publicInquiry
	Limits                                 FieldLimits
	Categories                             []tenancy.Category
	KeepCategory                           bool // carry In.Category as a hidden field
}

// formFields are the documented form fields; anything else is refused.
var formFields = map[string]bool{"name": true, "email": true, "subject": true, "message": true, "category": true,
	"website": true, "idempotency_key": true}

// newFormKey is the idempotency key a rendered form submits, so a resubmission (reload, double
// click) answers the first receipt.
func newFormKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "form-" + hex.EncodeToString(b[:])
}

// formPage is GET /f/{tenant_slug}.
func (s *Server) formPage(w http.ResponseWriter, r *http.Request) {
	if err := s.admitPage(w, r); err != nil {
		s.renderFormError(w, r, err)
		return
	}
	t, _, p, err := s.Tenancy.PublicTenant(r.Context(), mux.Vars(r)["tenant_slug"])
	if err != nil {
		s.renderFormError(w, r, err)
		return
	}
	v := s.formFor(t, p)
	v.Key = newFormKey()
	s.render(w, http.StatusOK, v)
}

// formFor is the form page of a tenant: its display name and categories.
func (s *Server) formFor(t tenancy.Tenant, p tenancy.Profile) formView {
	return formView{Page: "form", Title: "Contact " + p.Name, Slug: t.Slug, Limits: s.public.cfg.Fields, Categories: p.Categories}
}

// retryWords says how long Retry-After asks a person to wait.
func retryWords(h http.Header) string {
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	switch {
	case err != nil || secs < 1:
		return "a moment"
	case secs == 1:
		return "1 second"
	case secs < 120:
		return strconv.Itoa(secs) + " seconds"
	}
	return strconv.Itoa((secs+59)/60) + " minutes"
}

// formSubmit is POST /f/{tenant_slug}: a classic urlencoded form post, no JavaScript needed.
func (s *Server) formSubmit(w http.ResponseWriter, r *http.Request) {
	var in publicInquiry
	var key, receipt string
	a, err := s.admitPublic(w, r)
	if err == nil {
		in, key, err = decodeForm(w, r, s.public.cfg.MaxBody)
	}
	var view formView
	if err == nil {
		if view = s.formFor(a.tenant, a.profile); len(view.Categories) > 0 &&
			!slices.ContainsFunc(view.Categories, func(c tenancy.Category) bool { return c.Slug == in.Category }) {
			err = domain.Invalid("category", "choose one from the list")
		}
	}
	if err == nil {
		receipt, err = s.acceptPublic(r, a, in, key)
	}
	var ve *domain.ValidationError
	var ae *apiError
	switch {
	case err == nil:
		s.render(w, http.StatusAccepted, formView{Page: "receipt", Title: "Inquiry received", Receipt: receipt})
	case errors.As(err, &ve) && ve.Field != "idempotency_key":
		in.Website = ""
		view.Key, view.In, view.Error = key, in, "Please check the "+ve.Field+" field: "+ve.Reason+"."
		s.render(w, http.StatusUnprocessableEntity, view)
	case errors.As(err, &ae) && ae.code == "rate_limited":
		// Keep what the person typed, and say how long Retry-After asks them to wait. No storage is
		// read for a refused client (admission stays cheap): the page keeps the slug as its title
		// and the chosen category as a hidden field.
		slug := mux.Vars(r)["tenant_slug"]
		in, key, _ = decodeForm(w, r, s.public.cfg.MaxBody)
		in.Website = ""
		if key == "" {
			key = newFormKey()
		}
		view = formView{Page: "form", Title: "Contact " + slug, Slug: slug, Key: key, In: in, Limits: s.public.cfg.Fields, KeepCategory: true}
		view.Error = "Too many submissions from your network. Please wait " + retryWords(w.Header()) +
			", then send again; what you typed is kept below."
		s.render(w, http.StatusTooManyRequests, view)
	default:
		s.renderFormError(w, r, err)
	}
}

// decodeForm reads an application/x-www-form-urlencoded body of at most limit bytes with only
// documented fields, each at most once.
func decodeForm(w http.ResponseWriter, r *http.Request, limit int64) (publicInquiry, string, error) {
	var in publicInquiry
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return in, "", &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "body must be application/x-www-form-urlencoded"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return in, "", &apiError{http.StatusRequestEntityTooLarge, "body_too_large", "body exceeds " + strconv.FormatInt(limit, 10) + " bytes"}
		}
		return in, "", badRequest("could not read body")
	}
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return in, "", badRequest("malformed form body")
	}
	for k, v := range vals {
		if !formFields[k] {
			return in, "", badRequest("unknown field " + strconv.Quote(truncate(k)))
		}
		if len(v) > 1 {
			return in, "", badRequest("field " + strconv.Quote(truncate(k)) + " given more than once")
		}
	}
	in = publicInquiry{Name: vals.Get("name"), Email: vals.Get("email"), Subject: vals.Get("subject"), Message: vals.Get("message"),
		Category: vals.Get("category"), Website: vals.Get("website")}
	return in, vals.Get("idempotency_key"), nil
}

// formMessages are the form's words for each error code; the JSON message is not shown to people.
var formMessages = map[string]string{
	"not_found":              "This form does not exist.",
	"rate_limited":           "Too many submissions from your network. Please try again in a minute.",
	"cross_origin":           "This form can only be submitted from its own page or from the organisation's website.",
	"body_too_large":         "Your message is too long.",
	"idempotency_key_reused": "This form was already sent with other content. Please reload the page and send it again.",
	"validation_failed":      "The submission is not valid. Please reload the page and try again.",
}

func (s *Server) renderFormError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	msg, ok := formMessages[code]
	switch {
	case code == commands.StorageFull:
		s.storageFull(w, r, err)
		msg = "We cannot take submissions right now. Please try again in a few minutes."
	case status >= http.StatusInternalServerError:
		s.logger().ErrorContext(r.Context(), "request failed", "request_id", requestID(r.Context()), "err", err)
		msg = "Something went wrong on our side. Please try again later."
	case !ok:
		msg = "The submission could not be read. Please reload the page and try again."
	}
	s.render(w, status, formView{Page: "error", Title: http.StatusText(status), Error: msg})
}

func (s *Server) render(w http.ResponseWriter, status int, v formView) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", formCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = formTemplate.Execute(w, v)
}
