package httpapi

import "github.com/gorilla/mux"

// WalkRoutes visits every endpoint of the API with its methods; subrouter prefixes have no methods
// and are passed over.
func WalkRoutes(fn func(path string, methods []string)) error {
	return (&Server{}).router().Walk(func(r *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, perr := r.GetPathTemplate()
		methods, merr := r.GetMethods()
		if perr == nil && merr == nil {
			fn(path, methods)
		}
		return nil
	})
}
