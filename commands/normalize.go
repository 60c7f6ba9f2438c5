package commands

import (
	"golang.org/x/text/unicode/norm"

	"github.com/casebook/casebook/domain"
)

// Normalize applies the one text policy to a field (domain.CleanText: control, bidi and invisible
// characters removed, line breaks unified, trimmed) and composes it to Unicode NFC. Every command
// normalizes its free text with it (intake fields, transition reasons, note bodies), and the
// adapters call it first where they check their own limits. It is idempotent.
func Normalize(s string, multiline bool) string {
	return norm.NFC.String(domain.CleanText(s, multiline))
}

// NormalizeIntake normalizes every field of an intake; only the message keeps line breaks and tabs.
func NormalizeIntake(c Intake) Intake {
	c.Requester.Name = Normalize(c.Requester.Name, false)
	c.Requester.Email = Normalize(c.Requester.Email, false)
	c.Subject = Normalize(c.Subject, false)
	c.Message = Normalize(c.Message, true)
	c.Category = Normalize(c.Category, false)
	c.ExternalID = Normalize(c.ExternalID, false)
	c.Team = Normalize(c.Team, false)
	return c
}
