package fakeslack

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// itemsListMaxLimit caps a slackLists.items.list page. Slack does not document
// a maximum; 1000 is a guess. The default page is 100, also a guess.
const itemsListMaxLimit = 1000

type list struct {
	id, name    string
	createdBy   string
	access      map[string]string // user or channel id → read, write or owner (see access.go)
	dateCreated int64
	columns     []*column
	rowCap      int
	rows        []*row // active and archived, in creation order
	seq         int64
}

type column struct {
	id, key, name, typ string
	primary            bool
	options            json.RawMessage
	choices            []string
	multi              bool
}

type row struct {
	id          string
	seq         int64
	parentID    string
	cells       map[string]cell // by column id
	createdBy   string
	updatedBy   string
	dateCreated int64
	updated     int64
	archived    bool
}

type cell struct {
	kind string
	raw  json.RawMessage
}

func (l *list) column(id string) *column {
	for _, c := range l.columns {
		if c.id == id {
			return c
		}
	}
	return nil
}

func (l *list) row(id string) *row {
	for _, r := range l.rows {
		if r.id == id {
			return r
		}
	}
	return nil
}

func (l *list) counts() (active, archived int) {
	for _, r := range l.rows {
		if r.archived {
			archived++
		} else {
			active++
		}
	}
	return active, archived
}

// kindFor maps a column type to the typed value key that writes it. Text
// columns take rich_text only: Slack's docs say so even for plain text.
func kindFor(colType string) (kind string, editable bool) {
	switch colType {
	case "text", "rich_text":
		return "rich_text", true
	case "select", "multi_select":
		return "select", true
	case "date", "due_date", "todo_due_date":
		return "date", true
	case "user", "assignee", "todo_assignee":
		return "user", true
	case "checkbox", "completed", "todo_completed":
		return "checkbox", true
	case "created_by", "last_edited_by", "created_time", "last_edited_time":
		return "", false
	}
	return colType, true
}

// cellMetaKeys are the keys of a cell object that are not its value.
var cellMetaKeys = map[string]bool{"column_id": true, "row_id": true, "row_id_to_create": true, "column_id_to_create": true}

// checkCell validates one typed value for column col. An empty array clears.
func checkCell(col *column, kind string, value json.RawMessage) (cell, bool, *apiError) {
	want, editable := kindFor(col.typ)
	if !editable {
		return cell{}, false, errCode(CodeUneditableColumn)
	}
	if kind != want {
		return cell{}, false, errCode(CodeInvalidInputType)
	}
	value = bytes.TrimSpace(value)
	if kind == "checkbox" {
		var b bool
		if json.Unmarshal(value, &b) != nil {
			return cell{}, false, errCode(CodeInvalidInputType)
		}
		return cell{kind: kind, raw: compact(value)}, false, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(value, &items) != nil {
		return cell{}, false, errCode(CodeInvalidInputType)
	}
	if len(items) == 0 {
		return cell{}, true, nil
	}
	switch kind {
	case "rich_text":
		for _, it := range items {
			var b struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(it, &b) != nil || b.Type != "rich_text" {
				return cell{}, false, errCode(CodeInvalidBlocks)
			}
		}
	case "select":
		var vals []string
		if json.Unmarshal(value, &vals) != nil {
			return cell{}, false, errCode(CodeInvalidInputType)
		}
		if len(vals) > 1 && !col.multi {
			return cell{}, false, errCode(CodeOverCellFields)
		}
		for _, v := range vals {
			if len(col.choices) > 0 && !slices.Contains(col.choices, v) {
				return cell{}, false, errCode(CodeInvalidOptionID)
			}
		}
	case "date":
		var vals []string
		if json.Unmarshal(value, &vals) != nil {
			return cell{}, false, errCode(CodeInvalidDate)
		}
		for _, v := range vals {
			if _, err := time.Parse(time.DateOnly, v); err != nil {
				return cell{}, false, errCode(CodeInvalidDate)
			}
		}
	}
	return cell{kind: kind, raw: compact(value)}, false, nil
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return bytes.Clone(raw)
	}
	return b.Bytes()
}

// cellWrite is one parsed cell of initial_fields or cells.
type cellWrite struct {
	rowID    string
	toCreate bool
	columnID string
	kind     string
	value    json.RawMessage
	kinds    int // how many value keys the object carried
}

func parseCellWrites(raw []byte) ([]cellWrite, *apiError) {
	var objs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &objs); err != nil {
		return nil, errCode(CodeInvalidArgs)
	}
	out := make([]cellWrite, 0, len(objs))
	for _, o := range objs {
		var w cellWrite
		_ = json.Unmarshal(o["column_id"], &w.columnID)
		_ = json.Unmarshal(o["row_id"], &w.rowID)
		_ = json.Unmarshal(o["row_id_to_create"], &w.toCreate)
		for k, v := range o {
			if cellMetaKeys[k] {
				continue
			}
			w.kinds++
			w.kind, w.value = k, v
		}
		out = append(out, w)
	}
	return out, nil
}

// stage validates writes against l and returns the cells to set (nil value:
// clear) by column, checking every cell before anything is applied.
func (l *list) stage(w cellWrite, missingColumn string) (string, cell, bool, *apiError) {
	if w.columnID == "" {
		return "", cell{}, false, errCode(missingColumn)
	}
	col := l.column(w.columnID)
	if col == nil {
		return "", cell{}, false, errCode(unknownIDCode(w.columnID, "Col", CodeColumnNotFound, CodeInvalidColumnID))
	}
	if w.kinds != 1 {
		return "", cell{}, false, errCode(CodeInvalidInputType)
	}
	c, clear, e := checkCell(col, w.kind, w.value)
	return col.id, c, clear, e
}

// listLocked finds the List the bot calls a method on, needing the access level need (read or
// write): a missing list_id is invalid_args, an unknown one list_not_found, one the bot has too
// little access to permission_denied (see access.go).
func (s *Server) listLocked(id, need string) (*list, *apiError) {
	if id == "" {
		return nil, errCode(CodeInvalidArgs)
	}
	l, ok := s.lists[id]
	if !ok {
		return nil, errCode(CodeListNotFound)
	}
	if accessRank[l.access[s.opts.BotUserID]] < accessRank[need] {
		return nil, errCode(CodePermissionDenied)
	}
	return l, nil
}

// unknownIDCode is the error for an id the List does not hold. Slack documents both
// invalid_row_id/invalid_column_id ("Invalid … ID for this List") and row_not_found/
// column_not_found ("… was not found") without saying which answers when. Our guess: an id
// shaped like Slack's (Rec…, Col…) that names nothing here is *_not_found; anything else is
// invalid_*_id.
func unknownIDCode(id, prefix, notFound, invalid string) string {
	if strings.HasPrefix(id, prefix) && len(id) > len(prefix) {
		return notFound
	}
	return invalid
}

func (s *Server) newRowLocked(l *list, by string) *row {
	now := s.clock.Now().Unix()
	l.seq++
	r := &row{id: s.newIDLocked("Rec"), seq: l.seq, cells: map[string]cell{}, createdBy: by, updatedBy: by, dateCreated: now, updated: now}
	l.rows = append(l.rows, r)
	return r
}

// wireColumn is a schema column as Slack returns it.
type wireColumn struct {
	ID        string          `json:"id"`
	Key       string          `json:"key"`
	Name      string          `json:"name"`
	Type      string          `json:"type"`
	IsPrimary bool            `json:"is_primary_column"`
	Options   json.RawMessage `json:"options,omitempty"`
}

func (l *list) wireSchema() []wireColumn {
	out := make([]wireColumn, 0, len(l.columns))
	for _, c := range l.columns {
		out = append(out, wireColumn{ID: c.id, Key: c.key, Name: c.name, Type: c.typ, IsPrimary: c.primary, Options: c.options})
	}
	return out
}

func (l *list) wireMetadata() map[string]any {
	return map[string]any{
		"schema": l.wireSchema(), "subtask_schema": []wireColumn{}, "views": []any{}, "integrations": []any{},
		"icon": "", "description": "", "is_trial": false, "todo_mode": false, "default_view": "",
	}
}

func (s *Server) wireListLocked(l *list) map[string]any {
	active, archived := l.counts()
	return map[string]any{
		"id": l.id, "created": l.dateCreated, "timestamp": l.dateCreated, "updated": l.dateCreated,
		"name": l.name, "title": l.name, "mimetype": "application/vnd.slack-list", "filetype": "list",
		"pretty_type": "List", "user": l.createdBy, "user_team": s.opts.TeamID, "mode": "list",
		"list_metadata": l.wireMetadata(),
		"list_limits": map[string]any{
			"over_row_maximum": active >= l.rowCap, "row_count_limit": l.rowCap,
			"row_count": active, "archived_row_count": archived,
			"column_count": len(l.columns), "column_count_limit": 75,
		},
	}
}

// wireItem is a row as Slack returns it. Besides the typed key, each field
// carries "value", a legacy rendering: plain text for rich_text, the sole
// element of a one-element array, else the array. That rendering is a guess.
func (l *list) wireItem(r *row) map[string]any {
	fields := []map[string]any{}
	for _, col := range l.columns {
		c, ok := r.cells[col.id]
		if !ok {
			continue
		}
		f := map[string]any{"column_id": col.id, "key": col.key, c.kind: c.raw}
		switch c.kind {
		case "rich_text":
			txt := plainText(c.raw)
			f["text"], f["value"] = txt, txt
		case "checkbox":
			f["value"] = c.raw
		default:
			var items []json.RawMessage
			if json.Unmarshal(c.raw, &items) == nil && len(items) == 1 {
				f["value"] = items[0]
			} else {
				f["value"] = c.raw
			}
		}
		fields = append(fields, f)
	}
	item := map[string]any{
		"id": r.id, "list_id": l.id, "date_created": r.dateCreated, "created_by": r.createdBy,
		"updated_by": r.updatedBy, "updated_timestamp": strconv.FormatInt(r.updated, 10), "fields": fields,
	}
	if r.parentID != "" {
		item["parent_record_id"] = r.parentID
	}
	if r.archived {
		item["archived"] = true
	}
	return item
}

// plainText renders rich_text blocks as text: text and link elements, user
// mentions as <@U…>, emoji as :name:, one line per section.
func plainText(raw json.RawMessage) string {
	var blocks []any
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var lines []string
	var walk func(v any, b *strings.Builder)
	walk = func(v any, b *strings.Builder) {
		switch t := v.(type) {
		case []any:
			for _, e := range t {
				walk(e, b)
			}
		case map[string]any:
			typ, _ := t["type"].(string)
			switch typ {
			case "text":
				s, _ := t["text"].(string)
				b.WriteString(s)
				return
			case "link":
				s, _ := t["text"].(string)
				if s == "" {
					s, _ = t["url"].(string)
				}
				b.WriteString(s)
				return
			case "user":
				s, _ := t["user_id"].(string)
				b.WriteString("<@" + s + ">")
				return
			case "emoji":
				s, _ := t["name"].(string)
				b.WriteString(":" + s + ":")
				return
			}
			walk(t["elements"], b)
		}
	}
	for _, blk := range blocks {
		m, _ := blk.(map[string]any)
		els, _ := m["elements"].([]any)
		for _, el := range els {
			var b strings.Builder
			walk(el, &b)
			lines = append(lines, b.String())
		}
	}
	return strings.Join(lines, "\n")
}

// parseSchema reads slackLists.create's schema argument.
func (s *Server) parseSchemaLocked(raw []byte) ([]*column, *apiError) {
	var cols []struct {
		Key       string          `json:"key"`
		Name      string          `json:"name"`
		Type      string          `json:"type"`
		IsPrimary bool            `json:"is_primary_column"`
		Options   json.RawMessage `json:"options"`
	}
	if err := json.Unmarshal(raw, &cols); err != nil {
		return nil, errCode(CodeInvalidArgs)
	}
	out := make([]*column, 0, len(cols))
	for _, c := range cols {
		if c.Key == "" || c.Type == "" {
			return nil, errCode(CodeInvalidArgs)
		}
		col, e := newColumn(c.Key, c.Name, c.Type, c.IsPrimary, c.Options)
		if e != nil {
			return nil, e
		}
		out = append(out, col)
	}
	return out, nil
}

func newColumn(key, name, typ string, primary bool, options json.RawMessage) (*column, *apiError) {
	col := &column{key: key, name: name, typ: typ, primary: primary, multi: typ == "multi_select"}
	if len(options) > 0 && string(options) != "null" {
		var o struct {
			Choices []struct {
				Value string `json:"value"`
			} `json:"choices"`
			Format string `json:"format"`
		}
		if err := json.Unmarshal(options, &o); err != nil {
			return nil, errCode(CodeInvalidArguments)
		}
		for _, ch := range o.Choices {
			col.choices = append(col.choices, ch.Value)
		}
		col.multi = col.multi || o.Format == "multi_select"
		col.options = compact(options)
	}
	return col, nil
}

func (s *Server) addListLocked(name, by string, cols []*column) *list {
	if len(cols) == 0 {
		// Slack creates a List with one text column when no schema is given.
		cols = []*column{{key: "name", name: "Name", typ: "text", primary: true}}
	}
	if !slices.ContainsFunc(cols, func(c *column) bool { return c.primary }) {
		for _, c := range cols {
			if c.typ == "text" {
				c.primary = true
				break
			}
		}
	}
	for _, c := range cols {
		c.id = s.newIDLocked("Col")
	}
	l := &list{id: s.newIDLocked("F"), name: name, createdBy: by, dateCreated: s.clock.Now().Unix(), columns: cols, rowCap: s.opts.RowCap,
		access: map[string]string{by: accessOwner}}
	s.lists[l.id] = l
	return l
}

func (s *Server) listsCreate(req *request) (any, *apiError) {
	name := req.p.str("name")
	if name == "" {
		return nil, errCode(CodeInvalidArgs)
	}
	var cols []*column
	if raw := req.p.raw("schema"); raw != nil {
		var e *apiError
		if cols, e = s.parseSchemaLocked(raw); e != nil {
			return nil, e
		}
	}
	l := s.addListLocked(name, s.opts.BotUserID, cols)
	return map[string]any{"ok": true, "list_id": l.id, "list_metadata": map[string]any{"schema": l.wireSchema(), "subtask_schema": []wireColumn{}}}, nil
}

// createRowLocked validates and inserts a row; both the API and AddRow use it.
func (s *Server) createRowLocked(l *list, by, parentID, duplicateOf string, writes []cellWrite) (*row, *apiError) {
	cells := map[string]cell{}
	if duplicateOf != "" {
		src := l.row(duplicateOf)
		if src == nil {
			return nil, errCode(CodeDuplicatedNotFound)
		}
		for k, v := range src.cells {
			cells[k] = v
		}
	}
	if parentID != "" {
		if p := l.row(parentID); p == nil || p.parentID != "" {
			return nil, errCode(CodeRecordNotFound)
		}
	}
	for _, w := range writes {
		colID, c, clear, e := l.stage(w, CodeInvalidColumnID)
		if e != nil {
			return nil, e
		}
		if clear {
			delete(cells, colID)
		} else {
			cells[colID] = c
		}
	}
	if active, _ := l.counts(); active >= l.rowCap {
		return nil, errCode(CodeOverRowMaximum)
	}
	r := s.newRowLocked(l, by)
	r.parentID, r.cells = parentID, cells
	return r, nil
}

func (s *Server) itemsCreate(req *request) (any, *apiError) {
	l, e := s.listLocked(req.listID, accessWrite)
	if e != nil {
		return nil, e
	}
	var writes []cellWrite
	if raw := req.p.raw("initial_fields"); raw != nil {
		if writes, e = parseCellWrites(raw); e != nil {
			return nil, e
		}
	}
	r, e := s.createRowLocked(l, s.opts.BotUserID, req.p.str("parent_item_id"), req.p.str("duplicated_item_id"), writes)
	if e != nil {
		return nil, e
	}
	return map[string]any{"ok": true, "item": l.wireItem(r)}, nil
}

// updateRowsLocked validates every cell, then applies them all. Cells marked
// row_id_to_create go into one new row (a guess: Slack does not say whether
// each such cell makes its own row). All-or-nothing is also our reading.
func (s *Server) updateRowsLocked(l *list, by string, writes []cellWrite) *apiError {
	type staged struct {
		r     *row // nil: the new row
		colID string
		c     cell
		clear bool
	}
	var plan []staged
	create := false
	for _, w := range writes {
		var r *row
		if w.toCreate {
			create = true
		} else if r = l.row(w.rowID); r == nil {
			return errCode(unknownIDCode(w.rowID, "Rec", CodeRowNotFound, CodeInvalidRowID))
		}
		colID, c, clear, e := l.stage(w, CodeColumnIDNotProvided)
		if e != nil {
			return e
		}
		plan = append(plan, staged{r: r, colID: colID, c: c, clear: clear})
	}
	var fresh *row
	if create {
		if active, _ := l.counts(); active >= l.rowCap {
			return errCode(CodeOverRowMaximum)
		}
		fresh = s.newRowLocked(l, by)
	}
	now := s.clock.Now().Unix()
	for _, st := range plan {
		r := st.r
		if r == nil {
			r = fresh
		}
		if st.clear {
			delete(r.cells, st.colID)
		} else {
			r.cells[st.colID] = st.c
		}
		r.updated, r.updatedBy = now, by
	}
	return nil
}

func (s *Server) itemsUpdate(req *request) (any, *apiError) {
	l, e := s.listLocked(req.listID, accessWrite)
	if e != nil {
		return nil, e
	}
	raw := req.p.raw("cells")
	if raw == nil {
		return nil, errCode(CodeInvalidArgs)
	}
	writes, e := parseCellWrites(raw)
	if e != nil {
		return nil, e
	}
	if len(writes) == 0 {
		return nil, errCode(CodeInvalidArgs)
	}
	if e := s.updateRowsLocked(l, s.opts.BotUserID, writes); e != nil {
		return nil, e
	}
	return map[string]any{"ok": true}, nil
}

// deleteRowLocked removes a row and its subtasks.
func deleteRowLocked(l *list, id string) bool {
	if l.row(id) == nil {
		return false
	}
	l.rows = slices.DeleteFunc(l.rows, func(r *row) bool { return r.id == id || r.parentID == id })
	return true
}

func (s *Server) itemsDelete(req *request) (any, *apiError) {
	l, e := s.listLocked(req.listID, accessWrite)
	if e != nil {
		return nil, e
	}
	if req.p.str("id") == "" {
		return nil, errCode(CodeInvalidArgs)
	}
	if !deleteRowLocked(l, req.p.str("id")) {
		return nil, errCode(CodeRecordNotFound)
	}
	return map[string]any{"ok": true}, nil
}

func (s *Server) itemsInfo(req *request) (any, *apiError) {
	l, e := s.listLocked(req.listID, accessRead)
	if e != nil {
		return nil, e
	}
	if req.p.str("id") == "" {
		return nil, errCode(CodeInvalidArgs)
	}
	r := l.row(req.p.str("id"))
	if r == nil {
		return nil, errCode(CodeRecordNotFound)
	}
	subtasks := []map[string]any{}
	for _, sub := range l.rows {
		if sub.parentID == r.id {
			subtasks = append(subtasks, l.wireItem(sub))
		}
	}
	return map[string]any{"ok": true, "list": s.wireListLocked(l), "record": l.wireItem(r), "subtasks": subtasks}, nil
}

func itemsCursor(listID string, archived bool, seq int64) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "list_id:%s;archived:%t;seq:%d", listID, archived, seq))
}

func (s *Server) itemsList(req *request) (any, *apiError) {
	l, e := s.listLocked(req.listID, accessRead)
	if e != nil {
		return nil, e
	}
	limit, ok := req.p.integer("limit", 100)
	if !ok {
		return nil, errCode(CodeInvalidArgs)
	}
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, itemsListMaxLimit)
	// Cursor pagination may return fewer items than limit, and more pages
	// (https://api.slack.com/docs/pagination): ItemsPageMax plays that.
	if s.pageMax > 0 {
		limit = min(limit, s.pageMax)
	}
	archived := req.p.boolean("archived")
	var after int64
	if cur := req.p.str("cursor"); cur != "" {
		raw, err := base64.StdEncoding.DecodeString(cur)
		prefix := fmt.Sprintf("list_id:%s;archived:%t;seq:", l.id, archived)
		rest, found := strings.CutPrefix(string(raw), prefix)
		if err != nil || !found {
			return nil, errCode(CodeInvalidCursor)
		}
		if after, err = strconv.ParseInt(rest, 10, 64); err != nil {
			return nil, errCode(CodeInvalidCursor)
		}
	}
	items := []map[string]any{}
	next := ""
	var last int64
	for _, r := range l.rows {
		if r.archived != archived || r.seq <= after {
			continue
		}
		if len(items) == limit {
			next = itemsCursor(l.id, archived, last)
			break
		}
		items = append(items, l.wireItem(r))
		last = r.seq
	}
	out := map[string]any{"ok": true, "items": items, "response_metadata": map[string]any{"next_cursor": next}}
	if req.p.boolean("include_list") {
		out["list"] = s.wireListLocked(l)
	}
	return out, nil
}
