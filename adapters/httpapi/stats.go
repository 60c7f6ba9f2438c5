package httpapi

import (
	"net/http"
	"net/url"
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
	if err := onlyParams(q, statsParams); err != nil {
		s.writeError(w, r, err)
		return
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

// onlyParams refuses a query with a parameter not in allowed, or one given twice: a misspelt
// filter must not be ignored.
func onlyParams(q url.Values, allowed map[string]bool) error {
	for k, v := range q {
		if !allowed[k] {
			return badRequest("unknown query parameter " + strconv.Quote(k))
		}
		if len(v) > 1 {
			return badRequest("query parameter " + strconv.Quote(k) + " given more than once")
		}
	}
	return nil
}
