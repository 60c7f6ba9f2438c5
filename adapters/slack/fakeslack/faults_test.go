package fakeslack_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/slack-go/slack"
)

func TestSlackErrorFaults(t *testing.T) {
	t.Parallel()
	post := func(ctx context.Context, b *testBundle, _ board) error {
		_, _, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("x", false))
		return err
	}
	create := func(ctx context.Context, b *testBundle, bd board) error {
		_, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("x", "new")))
		return err
	}
	tests := []struct {
		code   string
		method string
		call   func(context.Context, *testBundle, board) error
	}{
		{fakeslack.CodeNotAuthed, "chat.postMessage", post},
		{fakeslack.CodeMissingScope, "chat.postMessage", post},
		{fakeslack.CodeTokenRevoked, "chat.postMessage", post},
		{fakeslack.CodeChannelNotFound, "chat.postMessage", post},
		{fakeslack.CodeListNotFound, "slackLists.items.create", create},
		{fakeslack.CodeOverRowMaximum, "slackLists.items.create", create},
		{fakeslack.CodeInvalidColumnID, "slackLists.items.create", create},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeslack.Options{})
			bd := createBoard(t, b)
			b.srv.FailNext(tt.method, fakeslack.SlackError(tt.code))

			err := tt.call(t.Context(), b, bd)
			if got := slackCode(err); got != tt.code {
				t.Fatalf("error %v, want %s", err, tt.code)
			}
			if tt.code == fakeslack.CodeMissingScope {
				var se slack.SlackErrorResponse
				if !errors.As(err, &se) || se.Needed != fakeslack.ScopeChatWrite || se.Provided == "" {
					t.Errorf("missing_scope needed=%q provided=%q", se.Needed, se.Provided)
				}
			}
			if n := len(b.srv.Messages(testChannel)) + len(b.srv.Rows(bd.listID)); n != 0 {
				t.Errorf("a failed call left %d messages and rows", n)
			}
			fired := b.srv.FiredFaults()
			if len(fired) != 1 || fired[0].Method != tt.method || fired[0].Fault.Code != tt.code {
				t.Errorf("fired = %+v", fired)
			}
			calls := b.srv.Calls()
			if last := calls[len(calls)-1]; !last.Fault || last.Error != tt.code || last.Applied || last.Status != http.StatusOK {
				t.Errorf("call = %+v", last)
			}
			// The fault was used up: the same call now succeeds.
			if err := tt.call(t.Context(), b, bd); err != nil {
				t.Errorf("second call: %v", err)
			}
			if n := b.srv.CallCount(tt.method); n != 2 {
				t.Errorf("%s called %d times, want 2", tt.method, n)
			}
		})
	}
}

func TestHTTPStatusFaults(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable} {
		b := setup(t, fakeslack.Options{})
		b.srv.FailNext("chat.postMessage", fakeslack.HTTPStatus(status))
		_, _, err := b.api.PostMessageContext(t.Context(), testChannel, slack.MsgOptionText("x", false))
		var sce slack.StatusCodeError
		if !errors.As(err, &sce) || sce.Code != status {
			t.Errorf("status %d: error %v", status, err)
		}
		if n := len(b.srv.Messages(testChannel)); n != 0 {
			t.Errorf("status %d: %d messages stored", status, n)
		}
		if c := b.srv.Calls()[0]; c.Status != status || !c.Fault || c.Applied {
			t.Errorf("status %d: call = %+v", status, c)
		}
	}
}

func TestRateLimitedFault(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	b.srv.FailNext("slackLists.items.create", fakeslack.RateLimited(6500*time.Millisecond))

	_, err := b.api.CreateListItemContext(t.Context(), bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("x", "new")))
	var rle *slack.RateLimitedError
	if !errors.As(err, &rle) || rle.RetryAfter != 7*time.Second {
		t.Fatalf("error %v, want a RateLimitedError of 7s", err)
	}
	if n := len(b.srv.Rows(bd.listID)); n != 0 {
		t.Errorf("%d rows after a 429", n)
	}
	if c := b.srv.Calls()[1]; c.Status != http.StatusTooManyRequests || c.Error != fakeslack.CodeRateLimited {
		t.Errorf("call = %+v", c)
	}
}

func TestFaultRulesMatchChannelAndList(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{Channels: []string{testChannel, "C0OTHERCH01"}})
	ctx := t.Context()
	bd := createBoard(t, b)
	other, err := b.api.CreateListContext(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	post := func(ch string) error {
		_, _, err := b.api.PostMessageContext(ctx, ch, slack.MsgOptionText("x", false))
		return err
	}
	list := func(id string) error {
		_, err := b.api.GetListItemsContext(ctx, id)
		return err
	}

	b.srv.AddRule(fakeslack.Rule{Method: "chat.postMessage", Channel: "C0OTHERCH01", Fault: fakeslack.SlackError(fakeslack.CodeChannelNotFound), Times: 2})
	if err := post(testChannel); err != nil {
		t.Errorf("post to an unmatched channel: %v", err)
	}
	for i := range 2 {
		if err := post("C0OTHERCH01"); slackCode(err) != fakeslack.CodeChannelNotFound {
			t.Errorf("post %d to the matched channel: %v", i, err)
		}
	}
	if err := post("C0OTHERCH01"); err != nil {
		t.Errorf("post after the rule ran out: %v", err)
	}

	// A rule with no method matches every call on its List until cleared.
	b.srv.AddRule(fakeslack.Rule{ListID: other.ListID, Fault: fakeslack.HTTPStatus(http.StatusInternalServerError), Times: -1})
	for range 3 {
		var sce slack.StatusCodeError
		if err := list(other.ListID); !errors.As(err, &sce) {
			t.Errorf("call on the matched List: %v", err)
		}
	}
	if err := list(bd.listID); err != nil {
		t.Errorf("call on another List: %v", err)
	}
	if pending := b.srv.PendingRules(); len(pending) != 1 || pending[0].Times >= 0 || pending[0].ListID != other.ListID {
		t.Errorf("pending = %+v", pending)
	}
	b.srv.ClearFaults()
	if err := list(other.ListID); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}
	if n := len(b.srv.FiredFaults()); n != 5 {
		t.Errorf("%d faults fired, want 5", n)
	}
}

func TestTimeoutAfterApplyClientGivesUp(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	b.srv.FailNext("slackLists.items.create", fakeslack.TimeoutAfterApply(0))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("uncertain", "new")))
		errc <- err
	}()
	if err := b.srv.WaitHung(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	// The row exists before the client hears anything.
	if rows := b.srv.Rows(bd.listID); len(rows) != 1 || rows[0].Text(bd.title) != "uncertain" {
		t.Fatalf("rows while hanging: %+v", rows)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want context.Canceled", err)
	}
	calls := b.srv.Calls()
	if last := calls[len(calls)-1]; !last.Applied || !last.Fault || last.Status != 0 {
		t.Errorf("call = %+v", last)
	}
	if n := len(b.srv.Rows(bd.listID)); n != 1 {
		t.Errorf("%d rows after the client gave up, want the applied one", n)
	}
}

func TestTimeoutAfterApplyDelayOnClock(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	b.srv.FailNext("chat.postMessage", fakeslack.TimeoutAfterApply(30*time.Second))

	errc := make(chan error, 1)
	go func() {
		_, _, err := b.api.PostMessageContext(t.Context(), testChannel, slack.MsgOptionText("uncertain", false))
		errc <- err
	}()
	if err := b.clock.WaitForTimers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if n := len(b.srv.Messages(testChannel)); n != 1 {
		t.Fatalf("%d messages while hanging, want 1", n)
	}
	b.clock.Advance(29 * time.Second)
	if b.srv.Hung() != 1 || b.clock.Timers() != 1 {
		t.Errorf("released before the delay: hung=%d timers=%d", b.srv.Hung(), b.clock.Timers())
	}
	b.clock.Advance(time.Second)
	err := <-errc
	var sce slack.StatusCodeError
	if !errors.As(err, &sce) || sce.Code != http.StatusGatewayTimeout {
		t.Errorf("error %v, want 504", err)
	}
	if n := len(b.srv.Messages(testChannel)); n != 1 {
		t.Errorf("%d messages after the timeout, want the applied one", n)
	}
	if c := b.srv.Calls()[0]; c.Status != http.StatusGatewayTimeout || !c.Applied {
		t.Errorf("call = %+v", c)
	}
}

func TestDropAfterApply(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()
	created, err := b.api.CreateListItemContext(ctx, bd.listID, slack.CreateListItemOptionInitialFields(bd.fields("x", "new")))
	if err != nil {
		t.Fatal(err)
	}

	b.srv.FailNext("slackLists.items.update", fakeslack.DropAfterApply())
	err = b.api.UpdateListItemsContext(ctx, bd.listID, []slack.ListItemCell{{RowID: created.Item.ID, ListItemField: slack.ListItemField{ColumnID: bd.status, Select: []string{"resolved"}}}})
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %v (%T), want a transport error", err, err)
	}
	if row, _ := b.srv.Row(bd.listID, created.Item.ID); row.Strings(bd.status)[0] != "resolved" {
		t.Errorf("update not applied: %+v", row.Cells)
	}

	b.srv.FailNext("chat.postMessage", fakeslack.DropAfterApply())
	if _, _, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("x", false)); !errors.As(err, &ue) {
		t.Errorf("post: error %v, want a transport error", err)
	}
	if n := len(b.srv.Messages(testChannel)); n != 1 {
		t.Errorf("%d messages after a dropped post, want the applied one", n)
	}
}

func TestCloseReleasesHungRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	b.srv.FailNext("chat.postMessage", fakeslack.TimeoutAfterApply(0))
	errc := make(chan error, 1)
	go func() {
		_, _, err := b.api.PostMessageContext(t.Context(), testChannel, slack.MsgOptionText("x", false))
		errc <- err
	}()
	if err := b.srv.WaitHung(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	b.srv.Close()
	if err := <-errc; err == nil {
		t.Error("a request hanging at Close succeeded")
	}
}

func TestAuthFailures(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	bd := createBoard(t, b)
	ctx := t.Context()

	noToken := slack.New("", slack.OptionAPIURL(b.srv.URL()), slack.OptionHTTPClient(b.http))
	if _, err := noToken.AuthTestContext(ctx); slackCode(err) != fakeslack.CodeNotAuthed {
		t.Errorf("no token: %v", err)
	}
	wrong := slack.New("xoxb-wrong", slack.OptionAPIURL(b.srv.URL()), slack.OptionHTTPClient(b.http))
	if _, err := wrong.AuthTestContext(ctx); slackCode(err) != fakeslack.CodeInvalidAuth {
		t.Errorf("wrong token: %v", err)
	}

	b.srv.SetScopes(fakeslack.ScopeChatWrite)
	_, err := b.api.GetListItemsContext(ctx, bd.listID)
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != fakeslack.CodeMissingScope || se.Needed != fakeslack.ScopeListsRead || se.Provided != fakeslack.ScopeChatWrite {
		t.Errorf("missing scope: %+v", err)
	}
	if _, _, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("x", false)); err != nil {
		t.Errorf("granted scope: %v", err)
	}

	b.srv.RevokeToken()
	if _, _, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("x", false)); slackCode(err) != fakeslack.CodeTokenRevoked {
		t.Errorf("revoked token: %v", err)
	}
	if got := b.srv.CallCounts(); got["auth.test"] != 2 || got["chat.postMessage"] != 2 || got["slackLists.items.list"] != 1 {
		t.Errorf("counts = %v", got)
	}
}

func TestUnknownMethod(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{})
	a := b.postForm(t, "reactions.add", url.Values{"token": {b.srv.Token()}, "channel": {testChannel}})
	if a.errCode() != fakeslack.CodeUnknownMethod {
		t.Errorf("answer = %+v", a.body)
	}
}
