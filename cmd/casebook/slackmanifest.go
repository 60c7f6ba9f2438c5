package main

import (
	"context"
	"flag"
	"io"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
)

// slackManifest prints the Slack app manifest (JSON) for a Casebook reachable at --public-url:
// paste it into "Create New App → From a manifest". It reads no storage.
func slackManifest(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("casebook slack manifest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	public := fs.String("public-url", envOr("CASEBOOK_PUBLIC_URL", ""), required+"https:// URL where Slack reaches Casebook (CASEBOOK_PUBLIC_URL)")
	name := fs.String("name", "Casebook", "the app's and the bot's name in Slack")
	lists := fs.Bool("lists", false, "add the lists:read and lists:write scopes (Slack Lists need a paid plan)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := slackinstall.NewManifest(slackinstall.ManifestOptions{PublicURL: *public, Name: *name, Lists: *lists})
	if err != nil {
		return usageError{err} // a flag's value
	}
	return printJSON(stdout, m)
}
