package lists

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/domain"
)

// Column keys a projected List must have. A column is required only when its field is cleared for
// the List's clearance; the marker and receipt columns always are.
const (
	ColMarker   = "casebook_marker"
	ColReceipt  = "receipt"
	ColStatus   = "status"
	ColPriority = "priority"
	ColTeam     = "team"
)

// Column is a resolved column: its id and, for a select, our value → the List's option value.
type Column struct {
	Key     string            `json:"key"`
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Options map[string]string `json:"options,omitempty"`
}

// Schema is what activation resolved; Fingerprint changes when any resolved id, type or option does.
type Schema struct {
	Columns     map[string]Column `json:"columns"`
	Fingerprint string            `json:"fingerprint"`
}

type wantCol struct {
	key    string
	field  string // domain.FieldClasses name; "" for the marker
	sel    bool
	values []string
}

func statusValues(cl domain.Classification) (field string, vals []string) {
	if domain.Cleared("status", cl) {
		for _, s := range domain.Statuses {
			vals = append(vals, string(s))
		}
		return "status", vals
	}
	return "status.coarse", []string{"open", "closed"}
}

// wanted lists the columns a List of clearance cl needs: only cleared fields (one policy with
// slackproj's redaction).
func wanted(cl domain.Classification) []wantCol {
	ws := []wantCol{{key: ColMarker}, {key: ColReceipt, field: "receipt"}}
	sf, sv := statusValues(cl)
	ws = append(ws, wantCol{key: ColStatus, field: sf, sel: true, values: sv})
	var pv []string
	for _, p := range domain.Priorities {
		pv = append(pv, string(p))
	}
	ws = append(ws, wantCol{key: ColPriority, field: "priority", sel: true, values: pv}, wantCol{key: ColTeam, field: "team"})
	out := ws[:0]
	for _, w := range ws {
		if w.field == "" || domain.Cleared(w.field, cl) {
			out = append(out, w)
		}
	}
	return out
}

func isText(t slack.ListColumnType) bool {
	return t == slack.ListColumnText || t == slack.ListColumnRichText
}

// Resolve matches a List's schema (by column key) against what clearance cl needs. A missing,
// retyped or option-less column is an error naming it: activation refuses, a check reports drift.
func Resolve(cols []slack.ListColumn, cl domain.Classification) (Schema, error) {
	s := Schema{Columns: map[string]Column{}}
	for _, w := range wanted(cl) {
		i := slices.IndexFunc(cols, func(c slack.ListColumn) bool { return c.Key == w.key })
		if i < 0 {
			return Schema{}, fmt.Errorf("column %q is missing", w.key)
		}
		c := cols[i]
		col := Column{Key: w.key, ID: c.ID, Type: string(c.Type)}
		switch {
		case !w.sel && !isText(c.Type):
			return Schema{}, fmt.Errorf("column %q is %s, want text", w.key, c.Type)
		case w.sel && c.Type != slack.ListColumnSelect:
			return Schema{}, fmt.Errorf("column %q is %s, want select", w.key, c.Type)
		case w.sel:
			col.Options = map[string]string{}
			for _, v := range w.values {
				found := false
				if c.Options != nil {
					for _, ch := range c.Options.Choices {
						if ch.Value == v || strings.EqualFold(ch.Label, v) {
							col.Options[v], found = ch.Value, true
							break
						}
					}
				}
				if !found {
					return Schema{}, fmt.Errorf("column %q has no option %q", w.key, v)
				}
			}
		}
		s.Columns[w.key] = col
	}
	s.Fingerprint = fingerprint(s.Columns)
	return s, nil
}

func fingerprint(cols map[string]Column) string {
	var lines []string
	for _, c := range cols {
		l := c.Key + "=" + c.ID + ":" + c.Type
		var opts []string
		for k, v := range c.Options {
			opts = append(opts, k+">"+v)
		}
		sort.Strings(opts)
		lines = append(lines, l+"["+strings.Join(opts, ",")+"]")
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:12])
}

// rowValues are the cleared values of a row: column key → our value ("" clears).
type rowValues map[string]string

// valuesFor renders an inquiry's cleared fields for a List of clearance cl.
func valuesFor(q *domain.Inquiry, cl domain.Classification, marker string) rowValues {
	v := rowValues{}
	for _, w := range wanted(cl) {
		switch w.key {
		case ColMarker:
			v[w.key] = marker
		case ColReceipt:
			v[w.key] = q.Receipt
		case ColStatus:
			switch {
			case w.field == "status":
				v[w.key] = string(q.Status)
			case q.Status.Terminal():
				v[w.key] = "closed"
			default:
				v[w.key] = "open"
			}
		case ColPriority:
			v[w.key] = string(q.Priority)
		case ColTeam:
			v[w.key] = q.Team
		}
	}
	return v
}

func richText(s string) []slack.RichTextBlock {
	b := slack.NewRichTextBlock("", slack.NewRichTextSection(slack.NewRichTextSectionTextElement(s, nil)))
	return []slack.RichTextBlock{*b}
}

// fields renders values as typed cells addressed by column id. With clear, an empty value clears
// its cell (items.update); without, it is left out (items.create).
func (s Schema) fields(v rowValues, clear bool) ([]slack.ListItemField, error) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []slack.ListItemField
	for _, k := range keys {
		val := v[k]
		col, ok := s.Columns[k]
		if !ok {
			return nil, fmt.Errorf("column %q not resolved", k)
		}
		if val == "" && !clear {
			continue
		}
		f := slack.ListItemField{ColumnID: col.ID}
		switch {
		case col.Options != nil && val == "":
			f.Select = []string{}
		case col.Options != nil:
			opt, ok := col.Options[val]
			if !ok {
				return nil, fmt.Errorf("column %q: no option for %q", k, val)
			}
			f.Select = []string{opt}
		case val == "":
			f.RichText = []slack.RichTextBlock{}
		default:
			f.RichText = richText(val)
		}
		out = append(out, f)
	}
	return out, nil
}

// cells turns fields into items.update cells of row.
func cells(row string, fs []slack.ListItemField) []slack.ListItemCell {
	out := make([]slack.ListItemCell, len(fs))
	for i, f := range fs {
		out[i] = slack.ListItemCell{ListItemField: f, RowID: row}
	}
	return out
}

// textOf reads a text cell back: Slack's plain rendering, else the rich text's text elements.
func textOf(f slack.ListItemFieldValue) string {
	if f.Text != "" {
		return f.Text
	}
	var b strings.Builder
	for _, blk := range f.RichText {
		for _, el := range blk.Elements {
			if sec, ok := el.(*slack.RichTextSection); ok {
				for _, e := range sec.Elements {
					if t, ok := e.(*slack.RichTextSectionTextElement); ok {
						b.WriteString(t.Text)
					}
				}
			}
		}
	}
	return b.String()
}

// cellText returns the text of the column with id in an item's fields.
func cellText(it slack.ListItem, id string) string {
	for _, f := range it.Fields {
		if f.ColumnID == id {
			return textOf(f)
		}
	}
	return ""
}

// cell returns what it holds in column key and what value reads as there: a select column holds
// the option id of the value ("" for none), a text column the text itself.
func (s Schema) cell(it slack.ListItem, key, value string) (got, want string) {
	col := s.Columns[key]
	if col.Options == nil {
		return cellText(it, col.ID), value
	}
	for _, f := range it.Fields {
		if f.ColumnID == col.ID && len(f.Select) == 1 {
			got = f.Select[0]
		}
	}
	if value != "" {
		value = col.Options[value]
	}
	return got, value
}

// mismatch compares a read-back item with values; "" when every cell holds what was written.
func (s Schema) mismatch(it slack.ListItem, v rowValues) string {
	for k, value := range v {
		got, want := s.cell(it, k, value)
		if got != want {
			return fmt.Sprintf("column %q reads %q, wrote %q", k, got, want)
		}
	}
	return ""
}
