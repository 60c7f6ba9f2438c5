package httpapi

import (
	"net/http"

	"github.com/gorilla/mux"
)

// consoleRoutes mounts the operator console (package console) under /console, and the receipt link
// that Slack messages carry. The console authenticates with its own session cookie; it shares the
// request id and the request log with the API.
func (s *Server) consoleRoutes(r *mux.Router) {
	if s.Console == nil {
		return
	}
	r.PathPrefix("/console").Handler(s.Console)
	r.Handle("/inquiries/r/{receipt}", s.Console).Methods(http.MethodGet)
}
