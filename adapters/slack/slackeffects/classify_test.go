package slackeffects

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// TestClassify: one case per class of the table, each as slack-go reports it, and whether a
// claimed create may be released (CertainlyNotApplied).
func TestClassify(t *testing.T) {
	t.Parallel()
	transport := &url.Error{Op: "Post", URL: "https://slack.example/api/chat.postMessage", Err: context.DeadlineExceeded}
	cases := []struct {
		name     string
		err      error
		class    Class
		released bool
	}{
		{"transport error", transport, ClassUnknown, false},
		{"5xx", slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}, ClassUnknown, false},
		{"fatal_error", slack.SlackErrorResponse{Err: "fatal_error"}, ClassUnknown, false},
		{"internal_error", slack.SlackErrorResponse{Err: "internal_error"}, ClassUnknown, false},
		{"request_timeout", slack.SlackErrorResponse{Err: "request_timeout"}, ClassUnknown, false},
		{"429", &slack.RateLimitedError{RetryAfter: 7 * time.Second}, ClassRateLimited, true},
		{"invalid_auth", slack.SlackErrorResponse{Err: "invalid_auth"}, ClassCircuit, true},
		{"account_inactive", slack.SlackErrorResponse{Err: "account_inactive"}, ClassCircuit, true},
		{"token_revoked", slack.SlackErrorResponse{Err: "token_revoked"}, ClassCircuit, true},
		{"token_expired", slack.SlackErrorResponse{Err: "token_expired"}, ClassCircuit, true},
		{"missing_scope", slack.SlackErrorResponse{Err: "missing_scope"}, ClassCircuit, true},
		{"not_in_channel", slack.SlackErrorResponse{Err: "not_in_channel"}, ClassCircuit, true},
		{"channel_not_found", slack.SlackErrorResponse{Err: "channel_not_found"}, ClassCircuit, true},
		{"is_archived", slack.SlackErrorResponse{Err: "is_archived"}, ClassCircuit, true},
		{"permission_denied", slack.SlackErrorResponse{Err: "permission_denied"}, ClassCircuit, true},
		{"restricted_action_read_only_channel", slack.SlackErrorResponse{Err: "restricted_action_read_only_channel"}, ClassCircuit, true},
		{"over_row_maximum", slack.SlackErrorResponse{Err: "over_row_maximum"}, ClassCapacity, true},
		{"column_not_found", slack.SlackErrorResponse{Err: "column_not_found"}, ClassDrift, true},
		{"msg_blocks_too_long", slack.SlackErrorResponse{Err: "msg_blocks_too_long"}, ClassQuarantined, true},
		{"invalid_blocks", slack.SlackErrorResponse{Err: "invalid_blocks"}, ClassQuarantined, true},
		{"invalid_args", slack.SlackErrorResponse{Err: "invalid_args"}, ClassQuarantined, true},
		{"invalid_text_block", slack.SlackErrorResponse{Err: "invalid_text_block"}, ClassQuarantined, true},
		{"row_not_found", slack.SlackErrorResponse{Err: "row_not_found"}, ClassGone, true},
		{"record_deleted", slack.SlackErrorResponse{Err: "record_deleted"}, ClassGone, true},
		{"message_not_found", slack.SlackErrorResponse{Err: "message_not_found"}, ClassGone, true},
		{"unlisted code", slack.SlackErrorResponse{Err: "some_new_code"}, ClassTransient, true},
		{"4xx without a body", slack.StatusCodeError{Code: 404, Status: "404 Not Found"}, ClassTransient, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wrapped := fmt.Errorf("chat.postMessage: %w", c.err)
			f := Classify(wrapped)
			if f.Class != c.class || !errors.Is(f.Err, wrapped) {
				t.Fatalf("Classify(%v) = %+v, want %s", c.err, f, c.class)
			}
			if got := CertainlyNotApplied(wrapped); got != c.released {
				t.Fatalf("CertainlyNotApplied(%v) = %v, want %v", c.err, got, c.released)
			}
		})
	}
	if f := Classify(&slack.RateLimitedError{RetryAfter: 7 * time.Second}); f.RetryAfter != 7*time.Second {
		t.Fatalf("429 wait = %s, want Retry-After", f.RetryAfter)
	}
	if f := Classify(&slack.RateLimitedError{}); f.RetryAfter != time.Second {
		t.Fatalf("429 without Retry-After waits %s, want 1s", f.RetryAfter)
	}
}
