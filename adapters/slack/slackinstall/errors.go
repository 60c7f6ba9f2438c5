package slackinstall

import (
	"errors"
	"time"

	"github.com/slack-go/slack"
)

// CallError is a failed Slack Web API call in terms that do not depend on slack-go: what the
// failure classifier (slackeffects) needs and nothing more.
type CallError struct {
	// Code is Slack's error code ("ratelimited" for an HTTP 429); "" when Slack did not answer
	// with an error body (a transport error or an HTTP status without one).
	Code string
	// Status is the HTTP status of a non-2xx answer without a Slack error body (0 otherwise).
	Status int
	// RetryAfter is a 429's Retry-After.
	RetryAfter time.Duration
	// Answered reports that Slack answered the call with an error, so it certainly did not apply.
	// Slack's own "possibly applied" codes (fatal_error, internal_error, request_timeout) are
	// answers too; the classifier decides what they mean.
	Answered bool
}

// Decode reads err, returned by a Slack client of this package. ok is false for an error that did
// not come from a Slack call (a context cancellation included, which reads as a transport error:
// the call may have been sent).
func Decode(err error) (CallError, bool) {
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	switch {
	case err == nil:
		return CallError{}, false
	case errors.As(err, &rl):
		return CallError{Code: "ratelimited", Status: 429, RetryAfter: rl.RetryAfter, Answered: true}, true
	case errors.As(err, &se):
		return CallError{Code: se.Err, Answered: true}, true
	case errors.As(err, &sc):
		return CallError{Status: sc.Code}, true
	}
	return CallError{}, false
}

// ErrorCode returns Slack's error code of err ("" when it has none).
func ErrorCode(err error) string {
	c, _ := Decode(err)
	return c.Code
}
