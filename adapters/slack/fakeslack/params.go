package fakeslack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxBody bounds a request body; Slack's own limits are not documented here.
const maxBody = 4 << 20

// params holds one request's arguments, from a form body, the query string,
// or a JSON body, behind one accessor.
type params struct {
	form  url.Values
	json  map[string]json.RawMessage
	token string // from the Authorization header, else the token argument
}

func parseParams(r *http.Request) (params, error) {
	p := params{form: url.Values{}}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return p, fmt.Errorf("read body: %w", err)
	}
	if len(body) > maxBody {
		return p, errors.New("body too large")
	}
	for k, v := range r.URL.Query() {
		p.form[k] = v
	}
	switch {
	case mediaType == "application/json":
		if len(bytes.TrimSpace(body)) > 0 {
			if err := json.Unmarshal(body, &p.json); err != nil {
				return p, fmt.Errorf("json body: %w", err)
			}
		}
	case len(body) > 0:
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return p, fmt.Errorf("form body: %w", err)
		}
		for k, vs := range v {
			p.form[k] = append(p.form[k], vs...)
		}
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		p.token = strings.TrimSpace(tok)
	} else {
		p.token = p.form.Get("token")
	}
	return p, nil
}

func (p params) has(key string) bool {
	if _, ok := p.json[key]; ok {
		return true
	}
	_, ok := p.form[key]
	return ok
}

// str returns a scalar argument as text: a JSON string unquoted, a JSON number
// or boolean as written.
func (p params) str(key string) string {
	if raw, ok := p.json[key]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		t := strings.TrimSpace(string(raw))
		if t == "null" {
			return ""
		}
		return t
	}
	return p.form.Get(key)
}

// raw returns a structured argument as JSON text. Form bodies carry it as a
// JSON-encoded string (as slack-go sends blocks and cells); JSON bodies may
// carry it inline or as such a string.
func (p params) raw(key string) []byte {
	if raw, ok := p.json[key]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []byte(s)
		}
		return raw
	}
	if !p.has(key) {
		return nil
	}
	return []byte(p.form.Get(key))
}

func (p params) boolean(key string) bool {
	switch strings.ToLower(p.str(key)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// integer returns the argument, def when it is absent, and ok=false when it
// is present but not a number.
func (p params) integer(key string, def int) (int, bool) {
	s := p.str(key)
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	return n, true
}
