package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gorilla/mux"
)

// Query parameters: every route takes exactly the query parameters its operation documents in
// openapi.json, which is read here as the one allow-list; any other, or one given twice, is a 400
// naming it before the handler runs (before authentication too: a parameter's name reveals
// nothing). A misspelt filter would otherwise be ignored and list everything. Routes the document
// does not describe take none, but for those that hand over to the console, which checks its own
// pages' parameters.

// consoleRoutes' templates: the console checks their query itself.
var consoleOwned = map[string]bool{"/console": true, "/inquiries/r/{receipt}": true}

// documentedQuery maps "METHOD template" to the operation's query parameters in openapi.json.
var documentedQuery = sync.OnceValue(func() map[string]map[string]bool {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		panic("httpapi: openapi.json: " + err.Error()) // embedded and tested: cannot happen
	}
	type param struct{ Name, In string }
	out := map[string]map[string]bool{}
	for path, ops := range doc.Paths {
		var common []param
		if raw, ok := ops["parameters"]; ok {
			_ = json.Unmarshal(raw, &common)
		}
		for method, raw := range ops {
			if method == "parameters" {
				continue
			}
			var op struct{ Parameters []param }
			_ = json.Unmarshal(raw, &op)
			names := map[string]bool{}
			for _, p := range append(op.Parameters, common...) {
				if p.In == "query" {
					names[p.Name] = true
				}
			}
			out[strings.ToUpper(method)+" "+path] = names
		}
	}
	return out
})

// QueryParams returns the query parameters that method on the route template takes, sorted
// (none for a route the OpenAPI document does not describe).
func QueryParams(method, template string) []string {
	var out []string
	for k := range documentedQuery()[method+" "+template] {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkQuery refuses a request whose query holds a parameter the matched route does not take, or
// one given more than once.
func (s *Server) checkQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery == "" {
			next.ServeHTTP(w, r)
			return
		}
		tpl := ""
		if m := mux.CurrentRoute(r); m != nil {
			tpl, _ = m.GetPathTemplate()
		}
		if consoleOwned[tpl] {
			next.ServeHTTP(w, r)
			return
		}
		if err := onlyParams(r.URL.Query(), documentedQuery()[r.Method+" "+tpl]); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// onlyParams refuses a query with a parameter not in allowed, or one given twice.
func onlyParams(q map[string][]string, allowed map[string]bool) error {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same request names the same parameter every time
	for _, k := range keys {
		if !allowed[k] {
			takes := "none"
			if len(allowed) > 0 {
				names := make([]string, 0, len(allowed))
				for n := range allowed {
					names = append(names, n)
				}
				slices.Sort(names)
				takes = strings.Join(names, ", ")
			}
			return &apiError{http.StatusBadRequest, "bad_request",
				"unknown query parameter " + strconv.Quote(truncate(k)) + " (this route takes: " + takes + ")"}
		}
		if len(q[k]) > 1 {
			return badRequest("query parameter " + strconv.Quote(truncate(k)) + " given more than once")
		}
	}
	return nil
}
