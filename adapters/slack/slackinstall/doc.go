// Package slackinstall is the Slack installation registry: the app's OAuth configuration,
// installations (per tenant, keyed by enterprise id when present, team id and app id),
// destinations, Slack user → principal links, the sealing of bot tokens and signing secrets
// (AES-256-GCM under a key derived from the instance secret with HKDF-SHA256), and the one
// constructor of Slack clients. It is the only package that reads or writes the installation
// tables, and slack-go's home: Decode turns slack-go's errors into CallError for the classifier.
package slackinstall
