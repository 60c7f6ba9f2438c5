package fakeslack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// Column is a List column. Choices are the option values of a select column.
type Column struct {
	ID      string // Col…; ignored by CreateList
	Key     string
	Name    string
	Type    string // text, rich_text, select, multi_select, date, user, number, checkbox, …
	Primary bool
	Choices []string
	Multi   bool // a select column that takes several values
}

// ListInfo is a snapshot of a List's schema and counts.
type ListInfo struct {
	ID               string
	Name             string
	Columns          []Column
	RowCap           int
	RowCount         int // active rows, subtasks included
	ArchivedRowCount int
}

// ColumnID returns the id of the column with key, or "".
func (l ListInfo) ColumnID(key string) string {
	for _, c := range l.Columns {
		if c.Key == key {
			return c.ID
		}
	}
	return ""
}

// Cell is a stored cell: its typed value key and the value as Slack took it.
type Cell struct {
	Kind  string // rich_text, select, date, user, checkbox, …
	Value json.RawMessage
}

// Text returns the plain text of a rich_text cell, or the cell's strings
// joined with ",".
func (c Cell) Text() string {
	if c.Kind == "rich_text" {
		return plainText(c.Value)
	}
	var out string
	for i, v := range c.Strings() {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

// Strings returns the values of an array-of-strings cell (select, date,
// user, …), or nil.
func (c Cell) Strings() []string {
	var vs []string
	if json.Unmarshal(c.Value, &vs) != nil {
		return nil
	}
	return vs
}

// Row is a snapshot of a List row.
type Row struct {
	ID               string
	ListID           string
	ParentID         string // set on subtasks
	Cells            map[string]Cell
	CreatedBy        string
	UpdatedBy        string
	DateCreated      int64
	UpdatedTimestamp int64
	Archived         bool
}

// Text returns the plain text of the row's cell in columnID.
func (r Row) Text(columnID string) string { return r.Cells[columnID].Text() }

// Strings returns the string values of the row's cell in columnID.
func (r Row) Strings(columnID string) []string { return r.Cells[columnID].Strings() }

// CellInput is a cell written by hand: Kind is the typed value key Slack
// takes for the column (rich_text for text columns) and Value its JSON.
type CellInput struct {
	ColumnID string
	Kind     string
	Value    json.RawMessage
}

// TextCell writes plain text to a text column as one rich_text section.
func TextCell(columnID, text string) CellInput {
	v, _ := json.Marshal([]any{map[string]any{
		"type": "rich_text",
		"elements": []any{map[string]any{
			"type":     "rich_text_section",
			"elements": []any{map[string]any{"type": "text", "text": text}},
		}},
	}})
	return CellInput{ColumnID: columnID, Kind: "rich_text", Value: v}
}

// SelectCell writes option values to a select column.
func SelectCell(columnID string, values ...string) CellInput {
	v, _ := json.Marshal(append([]string{}, values...))
	return CellInput{ColumnID: columnID, Kind: "select", Value: v}
}

// DateCell writes YYYY-MM-DD dates to a date column.
func DateCell(columnID string, dates ...string) CellInput {
	v, _ := json.Marshal(append([]string{}, dates...))
	return CellInput{ColumnID: columnID, Kind: "date", Value: v}
}

// ClearCell empties a cell.
func ClearCell(columnID, kind string) CellInput {
	return CellInput{ColumnID: columnID, Kind: kind, Value: json.RawMessage("[]")}
}

// APIError is the Slack error code a hand edit would have met through the
// API (invalid_column_id, over_row_maximum, …).
type APIError struct{ Code string }

func (e *APIError) Error() string { return "fakeslack: " + e.Code }

func toError(e *apiError) error {
	if e == nil {
		return nil
	}
	return &APIError{Code: e.code}
}

func inputsToWrites(rowID string, cells []CellInput) []cellWrite {
	out := make([]cellWrite, 0, len(cells))
	for _, c := range cells {
		out = append(out, cellWrite{rowID: rowID, columnID: c.ColumnID, kind: c.Kind, value: c.Value, kinds: 1})
	}
	return out
}

func (l *list) info() ListInfo {
	active, archived := l.counts()
	info := ListInfo{ID: l.id, Name: l.name, RowCap: l.rowCap, RowCount: active, ArchivedRowCount: archived}
	for _, c := range l.columns {
		info.Columns = append(info.Columns, Column{
			ID: c.id, Key: c.key, Name: c.name, Type: c.typ, Primary: c.primary,
			Choices: slices.Clone(c.choices), Multi: c.multi,
		})
	}
	return info
}

func (l *list) snapshot(r *row) Row {
	out := Row{
		ID: r.id, ListID: l.id, ParentID: r.parentID, Cells: map[string]Cell{},
		CreatedBy: r.createdBy, UpdatedBy: r.updatedBy, DateCreated: r.dateCreated,
		UpdatedTimestamp: r.updated, Archived: r.archived,
	}
	for k, c := range r.cells {
		out.Cells[k] = Cell{Kind: c.kind, Value: bytes.Clone(c.raw)}
	}
	return out
}

func (s *Server) handListLocked(id string) (*list, error) {
	l, ok := s.lists[id]
	if !ok {
		return nil, fmt.Errorf("list %s: %w", id, ErrNotFound)
	}
	return l, nil
}

// CreateList makes a List by hand, as a person would in Slack. Columns with
// no Type are text columns; with none at all the List has one text column.
func (s *Server) CreateList(name string, columns ...Column) (ListInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cols := make([]*column, 0, len(columns))
	for _, c := range columns {
		typ := c.Type
		if typ == "" {
			typ = "text"
		}
		var opts json.RawMessage
		if len(c.Choices) > 0 || c.Multi {
			o := map[string]any{}
			if len(c.Choices) > 0 {
				var choices []map[string]string
				for _, v := range c.Choices {
					choices = append(choices, map[string]string{"value": v, "label": v, "color": "gray"})
				}
				o["choices"] = choices
			}
			if c.Multi {
				o["format"] = "multi_select"
			}
			opts, _ = json.Marshal(o)
		}
		col, e := newColumn(c.Key, c.Name, typ, c.Primary, opts)
		if e != nil {
			return ListInfo{}, toError(e)
		}
		cols = append(cols, col)
	}
	l := s.addListLocked(name, "U0HUMAN0001", cols)
	l.access[s.opts.BotUserID] = accessWrite // shared with the app; SetBotAccess takes it back
	return l.info(), nil
}

// List returns a List's schema and counts.
func (s *Server) List(listID string) (ListInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lists[listID]
	if !ok {
		return ListInfo{}, false
	}
	return l.info(), true
}

// Lists returns every List, in creation order.
func (s *Server) Lists() []ListInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ListInfo, 0, len(s.lists))
	for _, l := range s.lists {
		out = append(out, l.info())
	}
	slices.SortFunc(out, func(a, b ListInfo) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// SetItemsPageMax caps every later slackLists.items.list page at n rows
// whatever limit asks (0: no cap below the method's maximum).
func (s *Server) SetItemsPageMax(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageMax = n
}

// SetRowCap changes one List's cap on active rows. Rows already over it stay.
func (s *Server) SetRowCap(listID string, rowCap int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.handListLocked(listID)
	if err != nil {
		return err
	}
	l.rowCap = rowCap
	return nil
}

func (s *Server) rows(listID string, archived bool) []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lists[listID]
	if !ok {
		return nil
	}
	var out []Row
	for _, r := range l.rows {
		if r.archived == archived {
			out = append(out, l.snapshot(r))
		}
	}
	return out
}

// Rows returns a List's active rows, subtasks included, in creation order.
func (s *Server) Rows(listID string) []Row { return s.rows(listID, false) }

// ArchivedRows returns a List's archived rows, in creation order.
func (s *Server) ArchivedRows(listID string) []Row { return s.rows(listID, true) }

// Row returns one row, active or archived.
func (s *Server) Row(listID, rowID string) (Row, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lists[listID]
	if !ok {
		return Row{}, false
	}
	r := l.row(rowID)
	if r == nil {
		return Row{}, false
	}
	return l.snapshot(r), true
}

// AddRow creates a row by hand as user by (a person, or a forger of our
// ownership marker). Cells are checked as items.create checks them, and the
// row cap applies. It returns the new row's id.
func (s *Server) AddRow(listID, by string, cells ...CellInput) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.handListLocked(listID)
	if err != nil {
		return "", err
	}
	r, e := s.createRowLocked(l, by, "", "", inputsToWrites("", cells))
	if e != nil {
		return "", toError(e)
	}
	return r.id, nil
}

// EditRow changes cells of a row by hand as user by, as items.update would.
func (s *Server) EditRow(listID, rowID, by string, cells ...CellInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.handListLocked(listID)
	if err != nil {
		return err
	}
	if l.row(rowID) == nil {
		return fmt.Errorf("row %s: %w", rowID, ErrNotFound)
	}
	return toError(s.updateRowsLocked(l, by, inputsToWrites(rowID, cells)))
}

// DeleteRow deletes a row (and its subtasks) by hand.
func (s *Server) DeleteRow(listID, rowID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.handListLocked(listID)
	if err != nil {
		return err
	}
	if !deleteRowLocked(l, rowID) {
		return fmt.Errorf("row %s: %w", rowID, ErrNotFound)
	}
	return nil
}

// ArchiveRow moves a row (and its subtasks) to the archive, as a person or
// Slack's auto-archive would. The API has no method for this.
func (s *Server) ArchiveRow(listID, rowID string) error { return s.setArchived(listID, rowID, true) }

// UnarchiveRow brings an archived row back; the row cap applies.
func (s *Server) UnarchiveRow(listID, rowID string) error { return s.setArchived(listID, rowID, false) }

func (s *Server) setArchived(listID, rowID string, archived bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.handListLocked(listID)
	if err != nil {
		return err
	}
	r := l.row(rowID)
	if r == nil {
		return fmt.Errorf("row %s: %w", rowID, ErrNotFound)
	}
	if r.archived == archived {
		return nil
	}
	var group []*row
	for _, x := range l.rows {
		if x == r || x.parentID == r.id {
			group = append(group, x)
		}
	}
	if !archived {
		if active, _ := l.counts(); active+len(group) > l.rowCap {
			return &APIError{Code: CodeOverRowMaximum}
		}
	}
	for _, x := range group {
		x.archived = archived
	}
	return nil
}
