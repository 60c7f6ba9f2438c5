package fakeslack_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/slack-go/slack"
)

// The fake serves slack-go like Slack would; a fault rule fails the next post.
func Example() {
	srv := fakeslack.New(fakeslack.Options{
		Channels: []string{"C0INQUIRIES"},
		Clock:    fakeslack.NewManualClock(time.Unix(1700000000, 0)),
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close() // runs first: releases hanging requests
	api := slack.New(srv.Token(), slack.OptionAPIURL(hs.URL+"/api/"))
	ctx := context.Background()

	srv.FailNext("chat.postMessage", fakeslack.SlackError(fakeslack.CodeChannelNotFound))
	_, _, err := api.PostMessageContext(ctx, "C0INQUIRIES", slack.MsgOptionText("New inquiry", false))
	fmt.Println(err)
	_, ts, err := api.PostMessageContext(ctx, "C0INQUIRIES", slack.MsgOptionText("New inquiry", false))
	fmt.Println(ts, err)
	fmt.Println(srv.CallCount("chat.postMessage"), len(srv.Messages("C0INQUIRIES")))
	// Output:
	// channel_not_found
	// 1700000000.000100 <nil>
	// 2 1
}

// Rows shows what a List holds, here after a create and a person's edit.
func ExampleServer_Rows() {
	srv := fakeslack.New(fakeslack.Options{RowCap: 1})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()
	api := slack.New(srv.Token(), slack.OptionAPIURL(hs.URL+"/api/"))
	ctx := context.Background()

	list, _ := srv.CreateList("Inquiries", fakeslack.Column{Key: "title", Primary: true},
		fakeslack.Column{Key: "status", Type: "select", Choices: []string{"new", "resolved"}})
	status := list.ColumnID("status")
	item, _ := api.CreateListItemContext(ctx, list.ID, slack.CreateListItemOptionInitialFields([]slack.ListItemField{
		{ColumnID: status, Select: []string{"new"}},
	}))
	_ = srv.EditRow(list.ID, item.Item.ID, "U0OPERATOR1", fakeslack.SelectCell(status, "resolved"))
	_, err := api.CreateListItemContext(ctx, list.ID)

	for _, r := range srv.Rows(list.ID) {
		fmt.Println(r.Strings(status), r.UpdatedBy)
	}
	fmt.Println(err)
	// Output:
	// [resolved] U0OPERATOR1
	// over_row_maximum
}
