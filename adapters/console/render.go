package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/casebook/casebook/domain"
)

// csp allows only the console's own assets: no inline script or style.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"whenp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"label": func(v any) string {
		s := strings.ReplaceAll(toString(v), "_", " ")
		if s == "" {
			return "—"
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	"path":    url.PathEscape,
	"query":   url.QueryEscape,
	"cleared": func(field string) bool { return domain.Cleared(field, domain.Personal) },
	"mailto":  mailto,
}

// mailto is the mailto: link of a plain address, percent-encoded as RFC 6068 asks: an addr-spec
// that net/mail reads back unchanged, with no "?", "&", "%", white space, control or format
// character (a "?" would start header fields such as cc or body). Anything else is "", and the
// page shows the address as text without a link.
func mailto(addr string) template.URL {
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Name != "" || a.Address != addr || !utf8.ValidString(addr) || strings.ContainsFunc(addr, func(r rune) bool {
		return r == '?' || r == '&' || r == '%' || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
	}) {
		return ""
	}
	var b strings.Builder
	b.WriteString("mailto:")
	for i := range len(addr) {
		c := addr[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!$'()*+;:@", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return template.URL(b.String()) //nolint:gosec // built above from an allow-list and percent-encoding
}

// detail summarises a timeline entry's data: the fields people read, principals by name.
func detail(raw json.RawMessage, names map[domain.PrincipalID]string) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range []string{"to", "from", "priority", "owner", "team", "reason", "body", "category", "source"} {
		v, ok := m[k]
		if !ok || v == "" || v == nil {
			continue
		}
		s := toString(v)
		if n, ok := names[domain.PrincipalID(s)]; ok && k == "owner" {
			s = n
		}
		parts = append(parts, k+": "+s)
	}
	return strings.Join(parts, "; ")
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case interface{ String() string }:
		return x.String()
	}
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

var pageNames = []string{"signin", "inbox", "inquiry", "dashboard", "admin", "error"}

func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		out[n] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html"))
	}
	return out
}

// page is what the layout renders around a page's data.
type page struct {
	Title   string
	Nav     string
	S       *session
	Admin   bool
	CSRF    string
	Data    any
	Status  int
	Message string
}

var titles = map[string]string{"signin": "Sign in", "inbox": "Inbox", "inquiry": "Inquiry", "dashboard": "Dashboard", "admin": "Admin",
	"error": "Problem"}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, s *session, data any) {
	p := page{Title: titles[name], Nav: name, S: s, Data: data, Status: status}
	if s != nil {
		p.CSRF = s.S.CSRF
		p.Admin = domain.Authorize(s.P, domain.ActAdminister) == nil
	}
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, p); err != nil {
		c.Logger.ErrorContext(r.Context(), "console render", "request_id", requestID(w), "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) renderError(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	if msg == "" {
		msg = "Something went wrong on our side. Please try again."
	}
	c.render(w, r, status, "error", s, map[string]any{"Status": status, "Text": http.StatusText(status), "Message": msg})
}
