package fakeslack

import (
	"encoding/json"
	"slices"
)

// RemoveColumn deletes a column from a List by hand, as a person editing the schema would.
func (s *Server) RemoveColumn(listID, columnID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.handListLocked(listID)
	if err != nil {
		return err
	}
	l.columns = slices.DeleteFunc(l.columns, func(c *column) bool { return c.id == columnID })
	return nil
}

// SetChoices replaces a select column's options by hand (values double as labels).
func (s *Server) SetChoices(listID, columnID string, values ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.handListLocked(listID)
	if err != nil {
		return err
	}
	c := l.column(columnID)
	if c == nil {
		return toError(errCode(CodeInvalidColumnID))
	}
	var choices []map[string]string
	for _, v := range values {
		choices = append(choices, map[string]string{"value": v, "label": v, "color": "gray"})
	}
	c.choices = values
	c.options, _ = json.Marshal(map[string]any{"choices": choices})
	return nil
}
