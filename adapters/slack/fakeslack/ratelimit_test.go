package fakeslack_test

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/slack-go/slack"
)

func TestRateLimitPerMethod(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeslack.Options{RateLimits: map[string]fakeslack.RateLimit{
		"chat.postMessage": {Budget: 2, Window: time.Minute},
	}})
	ctx := t.Context()
	post := func() error {
		_, _, err := b.api.PostMessageContext(ctx, testChannel, slack.MsgOptionText("x", false))
		return err
	}
	retryAfter := func(err error) time.Duration {
		t.Helper()
		var rle *slack.RateLimitedError
		if !errors.As(err, &rle) {
			t.Fatalf("error %v, want a RateLimitedError", err)
		}
		return rle.RetryAfter
	}

	for range 2 {
		if err := post(); err != nil {
			t.Fatal(err)
		}
	}
	if got := retryAfter(post()); got != time.Minute {
		t.Errorf("Retry-After %s, want 1m", got)
	}
	if _, err := b.api.AuthTestContext(ctx); err != nil {
		t.Errorf("another method is limited too: %v", err)
	}
	b.clock.Advance(45 * time.Second)
	if got := retryAfter(post()); got != 15*time.Second {
		t.Errorf("Retry-After %s after 45s, want 15s", got)
	}
	b.clock.Advance(15 * time.Second)
	if err := post(); err != nil {
		t.Errorf("post in a new window: %v", err)
	}
	if n := len(b.srv.Messages(testChannel)); n != 3 {
		t.Errorf("%d messages, want 3 (rate-limited posts apply nothing)", n)
	}
	if n := b.srv.CallCount("chat.postMessage"); n != 5 {
		t.Errorf("%d calls counted, want 5 including the limited ones", n)
	}
	limited := 0
	for _, c := range b.srv.Calls() {
		if c.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 2 {
		t.Errorf("%d calls answered 429, want 2", limited)
	}

	// Injected faults do not spend the budget: one post is left in this window.
	b.srv.FailNext("chat.postMessage", fakeslack.HTTPStatus(http.StatusInternalServerError))
	if err := post(); err == nil {
		t.Fatal("injected 500 did not fire")
	}
	if err := post(); err != nil {
		t.Errorf("post after an injected fault: %v", err)
	}
	retryAfter(post())

	// The raw answer, as Slack sends it.
	a := b.postForm(t, "chat.postMessage", url.Values{"token": {b.srv.Token()}, "channel": {testChannel}, "text": {"x"}})
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "60" || a.errCode() != fakeslack.CodeRateLimited {
		t.Errorf("raw 429: %d %q %+v", a.status, a.header.Get("Retry-After"), a.body)
	}

	b.srv.SetRateLimit("chat.postMessage", fakeslack.RateLimit{})
	if err := post(); err != nil {
		t.Errorf("post after removing the limit: %v", err)
	}
}
