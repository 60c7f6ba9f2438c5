package console

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// OpenPositionForTest opens a redirect's position token as the inquiry page does.
func (c *Console) OpenPositionForTest(tenant domain.TenantID, tok string) (eventstore.Position, error) {
	c.init()
	return c.openPosition(tenant, tok)
}

// WalkRoutesForTest visits every route of the console with its path template and methods (GET
// for a path prefix, which has none).
func (c *Console) WalkRoutesForTest(fn func(template string, methods []string)) error {
	return c.mux().Walk(func(r *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := r.GetPathTemplate()
		if err != nil {
			return err
		}
		methods, err := r.GetMethods()
		if err != nil {
			methods = []string{http.MethodGet}
		}
		fn(tpl, methods)
		return nil
	})
}
