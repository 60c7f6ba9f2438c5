package fakeslack_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"
)

// board is a List shaped like Casebook's: title, status, due date and an
// ownership marker column.
type board struct {
	listID, title, status, due, marker string
}

func createBoard(t *testing.T, b *testBundle) board {
	t.Helper()
	primary := true
	resp, err := b.api.CreateListContext(t.Context(), "Inquiries", slack.CreateListOptionSchema([]slack.ListColumn{
		{Key: "title", Name: "Title", Type: slack.ListColumnText, IsPrimaryColumn: &primary},
		{Key: "status", Name: "Status", Type: slack.ListColumnSelect, Options: &slack.ListColumnOptions{Choices: []slack.ListColumnChoice{
			{Value: "new", Label: "New", Color: slack.ListChoiceBlue},
			{Value: "in_progress", Label: "In progress", Color: slack.ListChoiceYellow},
			{Value: "resolved", Label: "Resolved", Color: slack.ListChoiceGreen},
		}}},
		{Key: "due", Name: "Due", Type: slack.ListColumnDate},
		{Key: "marker", Name: "Casebook marker", Type: slack.ListColumnText},
	}))
	if err != nil {
		t.Fatal(err)
	}
	bd := board{listID: resp.ListID}
	for _, c := range resp.ListMetadata.Schema {
		switch c.Key {
		case "title":
			bd.title = c.ID
		case "status":
			bd.status = c.ID
		case "due":
			bd.due = c.ID
		case "marker":
			bd.marker = c.ID
		}
	}
	return bd
}

func (bd board) fields(title, status string) []slack.ListItemField {
	return []slack.ListItemField{
		{ColumnID: bd.title, RichText: richText(title)},
		{ColumnID: bd.status, Select: []string{status}},
	}
}

func field(item slack.ListItem, columnID string) slack.ListItemFieldValue {
	for _, f := range item.Fields {
		if f.ColumnID == columnID {
			return f
		}
	}
	return slack.ListItemFieldValue{}
}

func TestListsCreate(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)

	if !strings.HasPrefix(bd.listID, "F") || len(bd.listID) != 11 {
		t.Errorf("list id = %q", bd.listID)
	}
	ids := map[string]bool{bd.title: true, bd.status: true, bd.due: true, bd.marker: true}
	for id := range ids {
		if !strings.HasPrefix(id, "Col") {
			t.Errorf("column id = %q", id)
		}
	}
	if len(ids) != 4 {
		t.Errorf("column ids not unique: %v", ids)
	}
	info, ok := b.srv.List(bd.listID)
	if !ok || info.ColumnID("status") != bd.status || !info.Columns[0].Primary {
		t.Fatalf("List = %+v", info)
	}
	if diff := cmp.Diff([]string{"new", "in_progress", "resolved"}, info.Columns[1].Choices); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}

	// Without a schema Slack makes one primary text column.
	empty, err := b.api.CreateListContext(t.Context(), "Scratch")
	if err != nil {
		t.Fatal(err)
	}
	if s := empty.ListMetadata.Schema; len(s) != 1 || s[0].Type != slack.ListColumnText || s[0].IsPrimaryColumn == nil || !*s[0].IsPrimaryColumn {
		t.Errorf("default schema = %+v", s)
	}
	if a := b.postForm(t, "slackLists.create", url.Values{"token": {b.srv.Token()}}); a.errCode() != fakeslack.CodeInvalidArgs {
		t.Errorf("create without name: %+v", a.body)
	}
}

func TestListItemsCreateAndInfo(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()

	created, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields([]slack.ListItemField{
		{ColumnID: bd.title, RichText: richText("Invoice is wrong")},
		{ColumnID: bd.status, Select: []string{"new"}},
		{ColumnID: bd.due, Date: []string{"2025-09-20"}},
		{ColumnID: bd.marker, RichText: richText("cb1:acme:inq-1:sig")},
	}))
	if err != nil {
		t.Fatal(err)
	}
	item := created.Item
	if !strings.HasPrefix(item.ID, "Rec") || item.ListID != bd.listID || item.CreatedBy != b.srv.BotUserID() || len(item.Fields) != 4 {
		t.Fatalf("created item = %+v", item)
	}
	if f := field(item, bd.title); f.Text != "Invoice is wrong" || f.Key != "title" || len(f.RichText) != 1 {
		t.Errorf("title field = %+v", f)
	}
	if f := field(item, bd.status); !cmp.Equal(f.Select, []string{"new"}) {
		t.Errorf("status field = %+v", f)
	}
	if f := field(item, bd.due); !cmp.Equal(f.Date, []string{"2025-09-20"}) {
		t.Errorf("due field = %+v", f)
	}

	sub, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionParentItemID(item.ID),
		slack.CreateListItemOptionInitialFields([]slack.ListItemField{{ColumnID: bd.title, RichText: richText("call back")}}))
	if err != nil {
		t.Fatal(err)
	}
	if sub.Item.ParentRecordID != item.ID {
		t.Errorf("subtask parent = %q", sub.Item.ParentRecordID)
	}

	info, err := b.api.GetListItemInfoContext(ctx, bd.listID, item.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Record.ID != item.ID || info.List.ID != bd.listID || len(info.List.ListMetadata.Schema) != 4 {
		t.Errorf("info = record %s list %s schema %d", info.Record.ID, info.List.ID, len(info.List.ListMetadata.Schema))
	}
	if len(info.Subtasks) != 1 || info.Subtasks[0].ID != sub.Item.ID {
		t.Errorf("subtasks = %+v", info.Subtasks)
	}
	if info.List.ListLimits.RowCount != 2 || info.List.ListLimits.RowCountLimit != fakeslack.DefaultRowCap {
		t.Errorf("limits = %+v", info.List.ListLimits)
	}

	dup, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionDuplicatedItemID(item.ID))
	if err != nil {
		t.Fatal(err)
	}
	if dup.Item.ID == item.ID || !cmp.Equal(field(dup.Item, bd.status).Select, []string{"new"}) {
		t.Errorf("duplicate = %+v", dup.Item)
	}
	_, err = b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionDuplicatedItemID("Rec0NOSUCH01"))
	if slackCode(err) != fakeslack.CodeDuplicatedNotFound {
		t.Errorf("duplicate of unknown row: %v", err)
	}

	row, ok := b.srv.Row(bd.listID, item.ID)
	if !ok || row.Text(bd.marker) != "cb1:acme:inq-1:sig" || !cmp.Equal(row.Strings(bd.status), []string{"new"}) {
		t.Errorf("stored row = %+v", row)
	}
	if n := len(b.srv.Rows(bd.listID)); n != 3 {
		t.Errorf("%d rows stored, want 3", n)
	}
}

func TestListItemsCreateIsNotIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)

	var ids []string
	for range 2 {
		resp, err := b.api.CreateListItemContext(t.Context(), bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("same", "new")))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Item.ID)
	}
	if ids[0] == ids[1] || len(b.srv.Rows(bd.listID)) != 2 {
		t.Errorf("two identical creates made rows %v; Slack has no upsert", ids)
	}
}

func TestListItemsUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()
	created, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(append(bd.fields("Invoice", "new"),
		slack.ListItemField{ColumnID: bd.due, Date: []string{"2025-09-20"}})))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Item.ID
	b.clock.Advance(90_000_000_000) // 90s

	err = b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{
		{RowID: id, ListItemField: slack.ListItemField{ColumnID: bd.status, Select: []string{"in_progress"}}},
		{RowID: id, ListItemField: slack.ListItemField{ColumnID: bd.title, RichText: richText("Invoice 42")}},
		{RowID: id, ListItemField: slack.ListItemField{ColumnID: bd.due, Date: []string{}}}, // clears
	})
	if err != nil {
		t.Fatal(err)
	}
	row, _ := b.srv.Row(bd.listID, id)
	if !cmp.Equal(row.Strings(bd.status), []string{"in_progress"}) || row.Text(bd.title) != "Invoice 42" {
		t.Errorf("after update: %+v", row.Cells)
	}
	if _, ok := row.Cells[bd.due]; ok {
		t.Errorf("due not cleared: %+v", row.Cells[bd.due])
	}
	if row.UpdatedTimestamp != row.DateCreated+90 || row.UpdatedBy != b.srv.BotUserID() {
		t.Errorf("updated %d by %s, created %d", row.UpdatedTimestamp, row.UpdatedBy, row.DateCreated)
	}

	// row_id_to_create cells make one new row.
	err = b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{
		{RowIDToCreate: true, ListItemField: slack.ListItemField{ColumnID: bd.title, RichText: richText("fresh")}},
		{RowIDToCreate: true, ListItemField: slack.ListItemField{ColumnID: bd.status, Select: []string{"new"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := b.srv.Rows(bd.listID)
	if len(rows) != 2 || rows[1].Text(bd.title) != "fresh" || !cmp.Equal(rows[1].Strings(bd.status), []string{"new"}) {
		t.Errorf("rows after row_id_to_create: %+v", rows)
	}
}

// TestListItemCellErrors: every refused write answers the code Slack documents for it
// (https://api.slack.com/methods/slackLists.items.update and .create, "Errors"): an id shaped like
// Slack's that names nothing is row_not_found / column_not_found, a malformed one
// invalid_row_id / invalid_column_id, missing or malformed arguments invalid_args; and a refused
// call changes nothing.
func TestListItemCellErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()
	created, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("keep", "new")))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Item.ID
	cell := func(f slack.ListItemField) slack.ListItemCell { return slack.ListItemCell{RowID: id, ListItemField: f} }

	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"create unknown column", func() error {
			_, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields([]slack.ListItemField{{ColumnID: "Col0NOSUCH01", Select: []string{"new"}}}))
			return err
		}, fakeslack.CodeColumnNotFound},
		{"create unknown option", func() error {
			_, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("x", "wontfix")))
			return err
		}, fakeslack.CodeInvalidOptionID},
		{"create two options in a single select", func() error {
			_, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields([]slack.ListItemField{{ColumnID: bd.status, Select: []string{"new", "resolved"}}}))
			return err
		}, fakeslack.CodeOverCellFields},
		{"create bad date", func() error {
			_, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields([]slack.ListItemField{{ColumnID: bd.due, Date: []string{"20/09/2025"}}}))
			return err
		}, fakeslack.CodeInvalidDate},
		{"create select value in a text column", func() error {
			_, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields([]slack.ListItemField{{ColumnID: bd.title, Select: []string{"new"}}}))
			return err
		}, fakeslack.CodeInvalidInputType},
		{"create in unknown list", func() error {
			_, err := b.api.CreateListItemContext(ctx, "F0NOSUCHLS1")
			return err
		}, fakeslack.CodeListNotFound},
		{"update unknown row", func() error {
			return b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{{RowID: "Rec0NOSUCH01", ListItemField: slack.ListItemField{ColumnID: bd.status, Select: []string{"new"}}}})
		}, fakeslack.CodeRowNotFound},
		{"update without column id", func() error {
			return b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{cell(slack.ListItemField{Select: []string{"new"}})})
		}, fakeslack.CodeColumnIDNotProvided},
		{"update unknown column", func() error {
			return b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{cell(slack.ListItemField{ColumnID: "Col0NOSUCH01", Select: []string{"new"}})})
		}, fakeslack.CodeColumnNotFound},
		{"update is all or nothing", func() error {
			return b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{
				cell(slack.ListItemField{ColumnID: bd.status, Select: []string{"resolved"}}),
				cell(slack.ListItemField{ColumnID: "Col0NOSUCH01", Select: []string{"new"}}),
			})
		}, fakeslack.CodeColumnNotFound},
		{"update in unknown list", func() error {
			return b.api.UpdateListItemsContext(ctx, "F0NOSUCHLS1", []slack.ListItemCell{cell(slack.ListItemField{ColumnID: bd.status, Select: []string{"new"}})})
		}, fakeslack.CodeListNotFound},
		{"plain text key instead of rich_text", func() error {
			a := b.postJSON(t, "slackLists.items.update", b.srv.Token(), map[string]any{
				"list_id": bd.listID, "cells": []any{map[string]any{"row_id": id, "column_id": bd.title, "text": "plain"}},
			})
			return errors.New(a.errCode())
		}, fakeslack.CodeInvalidInputType},
		{"update malformed row id", func() error {
			return b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{{RowID: "bogus", ListItemField: slack.ListItemField{ColumnID: bd.status, Select: []string{"new"}}}})
		}, fakeslack.CodeInvalidRowID},
		{"update malformed column id", func() error {
			return b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{cell(slack.ListItemField{ColumnID: "bogus", Select: []string{"new"}})})
		}, fakeslack.CodeInvalidColumnID},
		{"update without list id", func() error {
			a := b.postJSON(t, "slackLists.items.update", b.srv.Token(), map[string]any{
				"cells": []any{map[string]any{"row_id": id, "column_id": bd.status, "select": []string{"new"}}},
			})
			return errors.New(a.errCode())
		}, fakeslack.CodeInvalidArgs},
		{"update with cells that are not an array", func() error {
			a := b.postJSON(t, "slackLists.items.update", b.srv.Token(), map[string]any{"list_id": bd.listID, "cells": "{"})
			return errors.New(a.errCode())
		}, fakeslack.CodeInvalidArgs},
		{"legacy key and value", func() error {
			a := b.postJSON(t, "slackLists.items.update", b.srv.Token(), map[string]any{
				"list_id": bd.listID, "cells": []any{map[string]any{"row_id": id, "key": "status", "value": "resolved"}},
			})
			return errors.New(a.errCode())
		}, fakeslack.CodeColumnIDNotProvided},
	}
	for _, tt := range tests {
		err := tt.call()
		got := slackCode(err)
		if got == "" && err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: error %v, want %s", tt.name, err, tt.want)
		}
	}

	rows := b.srv.Rows(bd.listID)
	if len(rows) != 1 || rows[0].Text(bd.title) != "keep" || !cmp.Equal(rows[0].Strings(bd.status), []string{"new"}) {
		t.Errorf("failed writes changed state: %+v", rows)
	}
}

func TestListItemsDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()
	parent, _ := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("parent", "new")))
	if _, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionParentItemID(parent.Item.ID)); err != nil {
		t.Fatal(err)
	}
	other, _ := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("other", "new")))

	if err := b.api.DeleteListItemContext(ctx, bd.listID, parent.Item.ID); err != nil {
		t.Fatal(err)
	}
	rows := b.srv.Rows(bd.listID)
	if len(rows) != 1 || rows[0].ID != other.Item.ID {
		t.Errorf("after deleting a parent: %+v", rows)
	}
	if err := b.api.DeleteListItemContext(ctx, bd.listID, parent.Item.ID); slackCode(err) != fakeslack.CodeRecordNotFound {
		t.Errorf("second delete: %v", err)
	}
	if _, err := b.api.GetListItemInfoContext(ctx, bd.listID, parent.Item.ID); slackCode(err) != fakeslack.CodeRecordNotFound {
		t.Errorf("info of deleted row: %v", err)
	}
	if err := b.api.DeleteListItemContext(ctx, "F0NOSUCHLS1", other.Item.ID); slackCode(err) != fakeslack.CodeListNotFound {
		t.Errorf("delete in unknown list: %v", err)
	}
}

func TestListItemsListPagination(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()
	var ids []string
	for i := range 7 {
		resp, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields(strings.Repeat("r", i+1), "new")))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Item.ID)
	}

	var seen []string
	var pages []int
	cursor := ""
	for {
		resp, err := b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionLimit(3), slack.GetListItemsOptionCursor(cursor))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, len(resp.Items))
		for _, it := range resp.Items {
			seen = append(seen, it.ID)
		}
		cursor = resp.ResponseMetadata.Cursor
		if cursor == "" {
			break
		}
	}
	if diff := cmp.Diff(ids, seen); diff != "" {
		t.Errorf("rows in creation order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{3, 3, 1}, pages); diff != "" {
		t.Errorf("page sizes (-want +got):\n%s", diff)
	}

	// A cursor survives the deletion of the row after it.
	first, err := b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionLimit(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.api.DeleteListItemContext(ctx, bd.listID, ids[3]); err != nil {
		t.Fatal(err)
	}
	second, err := b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionLimit(3), slack.GetListItemsOptionCursor(first.ResponseMetadata.Cursor))
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Items) != 3 || second.Items[0].ID != ids[4] || second.ResponseMetadata.Cursor != "" {
		t.Errorf("page after a deletion: %d items, first %s, cursor %q", len(second.Items), second.Items[0].ID, second.ResponseMetadata.Cursor)
	}

	// A cursor is bound to its List and to active or archived.
	_, err = b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionCursor(first.ResponseMetadata.Cursor), slack.GetListItemsOptionArchived(true))
	if slackCode(err) != fakeslack.CodeInvalidCursor {
		t.Errorf("active cursor on archived: %v", err)
	}
	if _, err = b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionCursor("garbage")); slackCode(err) != fakeslack.CodeInvalidCursor {
		t.Errorf("garbage cursor: %v", err)
	}

	withList, err := b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionLimit(1), slack.GetListItemsOptionIncludeList(true))
	if err != nil {
		t.Fatal(err)
	}
	if withList.List == nil || withList.List.ListLimits.RowCount != 6 {
		t.Errorf("include_list = %+v", withList.List)
	}
}

func TestListItemsArchived(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()
	var ids []string
	for _, title := range []string{"a", "b", "c"} {
		resp, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields(title, "resolved")))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Item.ID)
	}
	if err := b.srv.ArchiveRow(bd.listID, ids[1]); err != nil {
		t.Fatal(err)
	}

	active, err := b.api.GetListItemsContext(ctx, bd.listID)
	if err != nil {
		t.Fatal(err)
	}
	if len(active.Items) != 2 || active.Items[0].ID != ids[0] || active.Items[1].ID != ids[2] {
		t.Errorf("active items = %+v", active.Items)
	}
	archived, err := b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionArchived(true), slack.GetListItemsOptionIncludeList(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(archived.Items) != 1 || archived.Items[0].ID != ids[1] || !archived.Items[0].Archived {
		t.Errorf("archived items = %+v", archived.Items)
	}
	if l := archived.List.ListLimits; l.RowCount != 2 || l.ArchivedRowCount != 1 {
		t.Errorf("limits = %+v", l)
	}
	info, err := b.api.GetListItemInfoContext(ctx, bd.listID, ids[1])
	if err != nil || !info.Record.Archived {
		t.Errorf("info of archived row: %v %+v", err, info)
	}
	if got := b.srv.ArchivedRows(bd.listID); len(got) != 1 || got[0].Text(bd.title) != "b" {
		t.Errorf("ArchivedRows = %+v", got)
	}

	if err := b.srv.UnarchiveRow(bd.listID, ids[1]); err != nil {
		t.Fatal(err)
	}
	if n := len(b.srv.Rows(bd.listID)); n != 3 {
		t.Errorf("%d active rows after unarchive", n)
	}
}

func TestRowCap(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{RowCap: 3})
	bd := createBoard(t, b)
	ctx := t.Context()
	var ids []string
	for i := range 3 {
		resp, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields(strings.Repeat("r", i+1), "new")))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Item.ID)
	}

	_, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("one too many", "new")))
	if slackCode(err) != fakeslack.CodeOverRowMaximum {
		t.Fatalf("fourth create: %v", err)
	}
	err = b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{{RowIDToCreate: true, ListItemField: slack.ListItemField{ColumnID: bd.status, Select: []string{"new"}}}})
	if slackCode(err) != fakeslack.CodeOverRowMaximum {
		t.Errorf("row_id_to_create at the cap: %v", err)
	}
	var apiErr *fakeslack.APIError
	if _, err := b.srv.AddRow(bd.listID, "U0OPERATOR1", fakeslack.TextCell(bd.title, "by hand")); !errors.As(err, &apiErr) || apiErr.Code != fakeslack.CodeOverRowMaximum {
		t.Errorf("AddRow at the cap: %v", err)
	}
	if n := len(b.srv.Rows(bd.listID)); n != 3 {
		t.Errorf("%d rows at a cap of 3", n)
	}
	calls := b.srv.Calls()
	if last := calls[len(calls)-1]; last.Error != fakeslack.CodeOverRowMaximum || last.Applied {
		t.Errorf("last call = %+v", last)
	}
	resp, err := b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionIncludeList(true))
	if err != nil || !resp.List.ListLimits.OverRowMaximum || resp.List.ListLimits.RowCountLimit != 3 {
		t.Errorf("limits at the cap: %v %+v", err, resp.List.ListLimits)
	}

	// Archived rows do not count.
	if err := b.srv.ArchiveRow(bd.listID, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("fits", "new"))); err != nil {
		t.Fatalf("create after archiving: %v", err)
	}
	if err := b.srv.UnarchiveRow(bd.listID, ids[0]); !errors.As(err, &apiErr) || apiErr.Code != fakeslack.CodeOverRowMaximum {
		t.Errorf("unarchive at the cap: %v", err)
	}
	if err := b.srv.SetRowCap(bd.listID, 10); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.UnarchiveRow(bd.listID, ids[0]); err != nil {
		t.Errorf("unarchive under a raised cap: %v", err)
	}
}

func TestListsJSONBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	tok := b.srv.Token()

	a := b.postJSON(t, "slackLists.items.create", tok, map[string]any{
		"list_id": bd.listID,
		"initial_fields": []any{
			map[string]any{"column_id": bd.title, "rich_text": richTextJSON("from JSON")},
			map[string]any{"column_id": bd.status, "select": []string{"new"}},
		},
	})
	if a.body["ok"] != true {
		t.Fatalf("items.create = %+v", a.body)
	}
	id := a.body["item"].(map[string]any)["id"].(string)
	a = b.postJSON(t, "slackLists.items.update", tok, map[string]any{
		"list_id": bd.listID,
		"cells":   []any{map[string]any{"row_id": id, "column_id": bd.status, "select": []string{"resolved"}}},
	})
	if a.body["ok"] != true {
		t.Fatalf("items.update = %+v", a.body)
	}
	a = b.postJSON(t, "slackLists.items.list", tok, map[string]any{"list_id": bd.listID, "limit": 10})
	items, _ := a.body["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("items.list = %+v", a.body)
	}
	row, _ := b.srv.Row(bd.listID, id)
	if row.Text(bd.title) != "from JSON" || !cmp.Equal(row.Strings(bd.status), []string{"resolved"}) {
		t.Errorf("row = %+v", row.Cells)
	}
	if a := b.postJSON(t, "slackLists.items.list", "", map[string]any{"list_id": bd.listID}); a.errCode() != fakeslack.CodeNotAuthed {
		t.Errorf("JSON without bearer: %+v", a.body)
	}
}

func TestHandEditedRows(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()
	ours, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(append(bd.fields("ours", "new"),
		slack.ListItemField{ColumnID: bd.marker, RichText: richText("cb1:acme:inq-1:sig")})))
	if err != nil {
		t.Fatal(err)
	}

	// A person drags our card and copies our marker onto a row of their own.
	if err := b.srv.EditRow(bd.listID, ours.Item.ID, "U0OPERATOR1", fakeslack.SelectCell(bd.status, "resolved")); err != nil {
		t.Fatal(err)
	}
	foreign, err := b.srv.AddRow(bd.listID, "U0OPERATOR1", fakeslack.TextCell(bd.title, "copy"), fakeslack.TextCell(bd.marker, "cb1:acme:inq-1:sig"),
		fakeslack.DateCell(bd.due, "2025-10-01"))
	if err != nil {
		t.Fatal(err)
	}

	resp, err := b.api.GetListItemsContext(ctx, bd.listID)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Items) != 2 {
		t.Fatalf("items = %+v", resp.Items)
	}
	if it := resp.Items[0]; it.UpdatedBy != "U0OPERATOR1" || it.CreatedBy != b.srv.BotUserID() || !cmp.Equal(field(it, bd.status).Select, []string{"resolved"}) {
		t.Errorf("edited row = %+v", it)
	}
	if it := resp.Items[1]; it.ID != foreign || it.CreatedBy != "U0OPERATOR1" || field(it, bd.marker).Text != "cb1:acme:inq-1:sig" {
		t.Errorf("foreign row = %+v", it)
	}

	var apiErr *fakeslack.APIError
	if _, err := b.srv.AddRow(bd.listID, "U0OPERATOR1", fakeslack.SelectCell("Col0NOSUCH01", "new")); !errors.As(err, &apiErr) || apiErr.Code != fakeslack.CodeColumnNotFound {
		t.Errorf("AddRow with unknown column: %v", err)
	}
	if err := b.srv.EditRow(bd.listID, foreign, "U0OPERATOR1", fakeslack.ClearCell(bd.due, "date")); err != nil {
		t.Fatal(err)
	}
	if row, _ := b.srv.Row(bd.listID, foreign); len(row.Cells) != 2 {
		t.Errorf("after clearing due: %+v", row.Cells)
	}
	if err := b.srv.DeleteRow(bd.listID, foreign); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.DeleteRow(bd.listID, foreign); !errors.Is(err, fakeslack.ErrNotFound) {
		t.Errorf("second DeleteRow: %v", err)
	}
	if _, err := b.srv.AddRow("F0NOSUCHLS1", "U0OPERATOR1"); !errors.Is(err, fakeslack.ErrNotFound) {
		t.Errorf("AddRow to unknown list: %v", err)
	}

	hand, err := b.srv.CreateList("Made by hand", fakeslack.Column{Key: "title", Primary: true},
		fakeslack.Column{Key: "tags", Type: "multi_select", Choices: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.srv.AddRow(hand.ID, "U0OPERATOR1", fakeslack.SelectCell(hand.ColumnID("tags"), "a", "b")); err != nil {
		t.Errorf("multi-select row: %v", err)
	}
	if got := b.srv.Lists(); len(got) != 2 || got[0].ID != bd.listID {
		t.Errorf("Lists = %+v", got)
	}
}

// TestItemsPageMaxPagesActiveAndArchivedApart: with a page cap below limit, active and archived
// rows page apart, each in creation order, with no row twice and none left out.
func TestItemsPageMaxPagesActiveAndArchivedApart(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{ItemsPageMax: 2})
	bd := createBoard(t, b)
	ctx := t.Context()
	var ids []string
	for i := range 9 {
		resp, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields(strings.Repeat("r", i+1), "new")))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Item.ID)
	}
	var wantActive, wantArchived []string
	for i, id := range ids {
		if i%3 == 0 {
			if err := b.srv.ArchiveRow(bd.listID, id); err != nil {
				t.Fatal(err)
			}
			wantArchived = append(wantArchived, id)
			continue
		}
		wantActive = append(wantActive, id)
	}
	scan := func(archived bool) (seen []string, pages int) {
		cursor := ""
		for {
			resp, err := b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionLimit(100),
				slack.GetListItemsOptionArchived(archived), slack.GetListItemsOptionCursor(cursor))
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(resp.Items) > 2 {
				t.Fatalf("page of %d rows with ItemsPageMax 2", len(resp.Items))
			}
			for _, it := range resp.Items {
				seen = append(seen, it.ID)
			}
			if cursor = resp.ResponseMetadata.Cursor; cursor == "" {
				return seen, pages
			}
		}
	}
	active, ap := scan(false)
	archived, rp := scan(true)
	if diff := cmp.Diff(wantActive, active); diff != "" {
		t.Errorf("active rows (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantArchived, archived); diff != "" {
		t.Errorf("archived rows (-want +got):\n%s", diff)
	}
	if ap != 3 || rp != 2 {
		t.Errorf("pages: active %d archived %d, want 3 and 2", ap, rp)
	}
	b.srv.SetItemsPageMax(0)
	if resp, err := b.api.GetListItemsContext(ctx, bd.listID, slack.GetListItemsOptionLimit(100)); err != nil || len(resp.Items) != 6 {
		t.Errorf("uncapped page: %v, %d rows", err, len(resp.Items))
	}
}
