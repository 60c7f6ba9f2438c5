package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/casebook/casebook/domain"
)

// events is GET /console/events: server-sent events that say when the tenant's inquiries changed
// (or, with ?inquiry=ID, that one inquiry) since the state named by ?since=. The page decides what to do (the inbox refreshes its
// list; the inquiry page offers a reload, so nothing typed is lost). The stream polls the query
// model, re-checks the session on every poll, and ends after a while or at shutdown; browsers
// reconnect by themselves.
func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.allowed(w, r, s, domain.ActRead) {
		return
	}
	id := domain.InquiryID(r.URL.Query().Get("inquiry"))
	token := func() (string, error) {
		if id == "" {
			return c.Reader.Changed(r.Context(), s.P.TenantID)
		}
		q, err := c.Reader.Get(r.Context(), s.P.TenantID, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(q.Version), nil
	}
	last, err := token()
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	// since is the state the page was rendered at: a change between rendering and connecting is
	// reported at once.
	if since := r.URL.Query().Get("since"); since != "" && len(since) <= 64 {
		last = since
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	write := func(msg string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprint(w, msg); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: 3000\n: connected\n\n") {
		return
	}
	tick := time.NewTicker(c.PollInterval)
	defer tick.Stop()
	end := time.NewTimer(streamFor)
	defer end.Stop()
	beats := 0
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-end.C:
			return
		case <-tick.C:
		}
		if _, _, err := c.Tenancy.SessionPrincipal(r.Context(), c.cookieSecret(r)); err != nil {
			_ = write("event: signedout\ndata: signed out\n\n")
			return
		}
		now, err := token()
		if err != nil {
			return
		}
		beats++
		switch {
		case now != last:
			last = now
			if !write("event: changed\ndata: " + now + "\n\n") {
				return
			}
		case beats%15 == 0:
			if !write(": keep-alive\n\n") {
				return
			}
		}
	}
}
