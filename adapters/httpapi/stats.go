package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/casebook/casebook/queries"
)

// statsParams are the stats route's query parameters; any other is 400.
var statsParams = map[string]bool{"from": true, "to": true, "consistent": true, "min_position": true}

// stats is GET /v1/stats?from=YYYY-MM-DD&to=YYYY-MM-DD: the caller's tenant's intake per day and
// current counts per status and priority.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	p, ok := s.read(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	for k, v := range q {
		if !statsParams[k] || len(v) > 1 {
			s.writeError(w, r, badRequest("unknown or repeated query parameter "+strconv.Quote(k)))
			return
		}
	}
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
