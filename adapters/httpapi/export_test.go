package httpapi

import "github.com/gorilla/mux"

// WalkRoutes visits every route of the API with its methods.
func WalkRoutes(fn func(path string, methods []string)) error {
	return (&Server{}).router().Walk(func(r *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := r.GetPathTemplate()
		if err != nil {
			return nil
		}
		methods, err := r.GetMethods()
		if err != nil {
			return nil // a subrouter prefix, not an endpoint
		}
		fn(path, methods)
		return nil
	})
}
