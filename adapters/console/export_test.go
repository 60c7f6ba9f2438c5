package console

import (
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// OpenPositionForTest opens a redirect's position token as the inquiry page does.
func (c *Console) OpenPositionForTest(tenant domain.TenantID, tok string) (eventstore.Position, error) {
	c.init()
	return c.openPosition(tenant, tok)
}
