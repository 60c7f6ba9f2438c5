package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/internal/app"
)

// slackEffectFlags are serve's settings of the Slack effect runtime; apply sets them on a config.
func slackEffectFlags(fs *flag.FlagSet) func(*app.Config) error {
	maxAttempts := fs.String("slack-max-attempts", envOr("CASEBOOK_SLACK_MAX_ATTEMPTS", strconv.Itoa(slackeffects.MaxAttempts)),
		"attempts of a Slack effect (unknown or transient failures) before it is a dead letter (CASEBOOK_SLACK_MAX_ATTEMPTS)")
	return func(c *app.Config) error {
		n, err := strconv.Atoi(*maxAttempts)
		if err != nil || n < 1 || n > 100 {
			return fmt.Errorf("--slack-max-attempts %q: want 1 to 100", *maxAttempts)
		}
		c.SlackMaxAttempts = n
		return nil
	}
}
