package httpapi

import (
	"net/http"
	"time"

	"github.com/casebook/casebook/queries"
)

// stats is GET /v1/stats?from=YYYY-MM-DD&to=YYYY-MM-DD: the caller's tenant's intake per day and
// current counts per status and priority.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	p, ok := s.read(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	from, to, err := queries.StatsRange(q.Get("from"), q.Get("to"), now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.Reader.Stats(r.Context(), p.TenantID, from, to)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
