package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/app"
)

// slackEffectFlags are serve's settings of the Slack effect runtime; apply sets them on a config.
func slackEffectFlags(fs *flag.FlagSet) func(*app.Config) error {
	maxAttempts := fs.String("slack-max-attempts", envOr("CASEBOOK_SLACK_MAX_ATTEMPTS", strconv.Itoa(slackeffects.MaxAttempts)),
		"attempts of a Slack effect (unknown or transient failures) before it is a dead letter (CASEBOOK_SLACK_MAX_ATTEMPTS)")
	quiet := fs.String("slack-quiet", envOr("CASEBOOK_SLACK_QUIET", "2s"),
		"debounce: a thread or List row update is sent once its inquiry has been quiet this long; negative: at once (CASEBOOK_SLACK_QUIET)")
	maxDelay := fs.String("slack-max-delay", envOr("CASEBOOK_SLACK_MAX_DELAY", "15s"),
		"debounce: an update is sent at most this long after the change, however busy the inquiry (CASEBOOK_SLACK_MAX_DELAY)")
	return func(c *app.Config) error {
		q, qerr := time.ParseDuration(*quiet)
		d, derr := time.ParseDuration(*maxDelay)
		if qerr != nil || derr != nil || q == 0 || d <= 0 {
			return fmt.Errorf("--slack-quiet %q, --slack-max-delay %q: want durations, a non-zero quiet window (negative: no debounce) and a positive maximum delay", *quiet, *maxDelay)
		}
		c.SlackTiming.Quiet, c.SlackTiming.MaxDelay = q, d
		n, err := strconv.Atoi(*maxAttempts)
		if err != nil || n < 1 || n > 100 {
			return fmt.Errorf("--slack-max-attempts %q: want 1 to 100", *maxAttempts)
		}
		c.SlackMaxAttempts = n
		return nil
	}
}
