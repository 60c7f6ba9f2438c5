package httpapi

import (
	"net/http"

	"github.com/gorilla/mux"
)

// SlackCallbacks serves Slack's signed requests. They carry no bearer token: the handler verifies
// each request's signature against the raw body before reading it.
type SlackCallbacks interface {
	Interactions(w http.ResponseWriter, r *http.Request)
	Events(w http.ResponseWriter, r *http.Request)
}

func (s *Server) slackCallbackRoutes(r *mux.Router) {
	if s.SlackCallbacks == nil {
		return
	}
	r.HandleFunc("/slack/interactions", s.SlackCallbacks.Interactions).Methods(http.MethodPost)
	r.HandleFunc("/slack/events", s.SlackCallbacks.Events).Methods(http.MethodPost)
}
