package httpapi

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/queries"
)

// lifecycleRoutes are the data-lifecycle commands on one inquiry. Archive and unarchive need
// If-Match (they change what the inquiry is); a hold and an erasure are admin decisions the domain
// authorizes, and they too need If-Match: an admin erases what they saw.
func (s *Server) lifecycleRoutes(inquiries *mux.Router) {
	inquiries.HandleFunc("/{id}/archive", s.archive).Methods(http.MethodPost)
	inquiries.HandleFunc("/{id}/unarchive", s.unarchive).Methods(http.MethodPost)
	inquiries.HandleFunc("/{id}/hold", s.placeHold).Methods(http.MethodPost)
	inquiries.HandleFunc("/{id}/hold", s.releaseHold).Methods(http.MethodDelete)
	inquiries.HandleFunc("/{id}/erase", s.erase).Methods(http.MethodPost)
}

type reasonBody struct {
	Reason string `json:"reason"`
}

func (s *Server) archive(w http.ResponseWriter, r *http.Request) {
	var in reasonBody
	s.command(w, r, true, &in, func(t commands.Target) (commands.Result, error) {
		return s.Commands.Archive(r.Context(), commands.Archive{Target: t, Reason: in.Reason})
	})
}

func (s *Server) unarchive(w http.ResponseWriter, r *http.Request) {
	var in reasonBody
	s.command(w, r, true, optionalBody(r, &in), func(t commands.Target) (commands.Result, error) {
		return s.Commands.Unarchive(r.Context(), commands.Unarchive{Target: t, Reason: in.Reason})
	})
}

func (s *Server) placeHold(w http.ResponseWriter, r *http.Request) {
	var in reasonBody
	s.command(w, r, false, &in, func(t commands.Target) (commands.Result, error) {
		return s.Commands.Hold(r.Context(), commands.Hold{Target: t, Reason: in.Reason})
	})
}

func (s *Server) releaseHold(w http.ResponseWriter, r *http.Request) {
	var in reasonBody
	s.command(w, r, false, optionalBody(r, &in), func(t commands.Target) (commands.Result, error) {
		return s.Commands.Hold(r.Context(), commands.Hold{Target: t, Release: true, Reason: in.Reason})
	})
}

func (s *Server) erase(w http.ResponseWriter, r *http.Request) {
	s.command(w, r, true, nil, func(t commands.Target) (commands.Result, error) {
		return s.Commands.Erase(r.Context(), commands.Erase{Target: t, Policy: "request"})
	})
}

// optionalBody decodes a body only when one was sent (unarchive and release take an optional reason).
func optionalBody(r *http.Request, v any) any {
	if r.ContentLength == 0 {
		return nil
	}
	return v
}

// archivedFilter reads the list's archived parameter: the working set by default, archived
// inquiries with archived=true.
func archivedFilter(q url.Values, f *queries.Filter) error {
	v := q.Get("archived")
	if v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return domain.Invalid("archived", "must be true or false")
	}
	f.Archived = &b
	return nil
}
