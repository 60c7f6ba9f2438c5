package slackinstall

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/casebook/casebook/domain"
)

// Person is a principal as a Slack message names them (an owner, a reminder's recipient): their
// Slack user linked in the message's installation, else their display name. A message never shows
// a principal id.
type Person struct {
	SlackUser string
	Name      string
}

var slackUserRE = regexp.MustCompile(`^[UW][A-Z0-9]{1,20}$`)

// Text renders p for a destination of clearance: the mention <@U…> of their linked Slack user (an
// operator's Slack identity, not requester data); else their display name, escaped, where
// personal data is cleared (a display name is personal data, as in the logs); else "" and the
// caller says the person has no linked account. The caller checks that the field naming p (owner,
// watchers) is cleared at all.
func (p Person) Text(clearance domain.Classification) string {
	switch {
	case slackUserRE.MatchString(p.SlackUser):
		return "<@" + p.SlackUser + ">"
	case strings.TrimSpace(p.Name) != "" && domain.Cleared("requester.name", clearance):
		return FitEscaped(p.Name, 200)
	}
	return ""
}

// Unlinked is how a message names a person Text cannot show.
const Unlinked = "someone without a linked Slack account"

// ActionValue is a root message element's value: its payload (the receipt, or a status for the
// status select) and the inquiry version the message was rendered at, "{payload}@v{version}", so a
// click on an outdated message can be told from one on the current message. It fits Slack's
// limits (the payload is cut first): max is MaxActionValue for a button, 150 for an option.
func ActionValue(payload string, version uint64, max int) string {
	suffix := "@v" + strconv.FormatUint(version, 10)
	return Fit(payload, max-len(suffix)) + suffix
}

// ParseActionValue splits a value made by ActionValue. ok is false for a value without a version
// (an element rendered before versions were added): such clicks are taken as they always were.
// The version only ever refuses a click, it never authorizes one, so a forged value gains nothing.
func ParseActionValue(v string) (payload string, version uint64, ok bool) {
	i := strings.LastIndex(v, "@v")
	if i < 0 {
		return v, 0, false
	}
	n, err := strconv.ParseUint(v[i+2:], 10, 64)
	if err != nil || n == 0 {
		return v, 0, false
	}
	return v[:i], n, true
}
