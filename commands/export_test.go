package commands

import "github.com/casebook/casebook/domain"

// CachedFold returns the fold c holds of stream (nil: none) and its follow-up note revisions.
func CachedFold(c *FoldCache, stream string) (*domain.Inquiry, map[string]uint64) {
	e := c.get(stream)
	if e == nil {
		return nil, nil
	}
	return e.q, e.notes
}
