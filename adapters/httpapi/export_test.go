package httpapi

import (
	"net/http"

	"github.com/gorilla/mux"
)

// WalkRoutes visits every endpoint of the API with its methods; subrouter prefixes have no methods
// and are passed over.
func WalkRoutes(fn func(path string, methods []string)) error {
	return walk(&Server{}, fn)
}

// WalkAllRoutes is WalkRoutes with every optional part configured (metrics, console, Slack
// callbacks), so that it visits every route a fully wired server has; a path prefix that hands
// over to another handler (the console) is visited with GET.
func WalkAllRoutes(fn func(path string, methods []string)) error {
	stub := http.NotFoundHandler()
	return walk(&Server{Metrics: stub, Console: stub, SlackCallbacks: stubCallbacks{}}, func(path string, methods []string) {
		fn(path, methods)
	}, http.MethodGet)
}

type stubCallbacks struct{}

func (stubCallbacks) Interactions(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNotImplemented)
}
func (stubCallbacks) Events(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNotImplemented)
}

// walk visits s's routes; a route without methods is visited with prefixMethods (none: passed over).
func walk(s *Server, fn func(path string, methods []string), prefixMethods ...string) error {
	return s.router().Walk(func(r *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, perr := r.GetPathTemplate()
		methods, merr := r.GetMethods()
		if merr != nil && r.GetHandler() != nil && len(prefixMethods) > 0 {
			methods, merr = prefixMethods, nil
		}
		if perr == nil && merr == nil {
			fn(path, methods)
		}
		return nil
	})
}
