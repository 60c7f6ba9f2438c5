package projections

import "github.com/casebook/casebook/eventstore"

// PersonalReader is how a projection declares whether it reads personal members of events
// (domain.PersonalFields: requester, subject, message, external id, note bodies). One that does not
// receives the events as stored (eventstore.SealedViews): nothing is decrypted for it, and it
// never holds personal data. A projection that declares nothing gets opened events, as it always
// did: the choice fails safe for its output, and every projection Casebook runs declares one
// (app.TestEveryProjectionDeclaresPersonalData).
type PersonalReader interface {
	ReadsPersonalData() bool
}

// PersonalSelector is a PersonalReader that needs the personal members of some events only.
// NeedsPersonalData is called with each event as stored (no personal member in clear) and names
// those it must read opened; the others reach the projection as stored. It must err towards
// true: an event it passes over reaches Apply without its personal members.
type PersonalSelector interface {
	PersonalReader
	NeedsPersonalData(e eventstore.RecordedEvent) bool
}

// ReadsPersonalData reports what p declares; true when it declares nothing.
func ReadsPersonalData(p Projection) bool {
	d, ok := p.(PersonalReader)
	return !ok || d.ReadsPersonalData()
}

// source is the log as p reads it: as stored when p reads no personal member and store can say so,
// opened only where p needs it when p is a PersonalSelector.
func source(store eventstore.Store, p Projection) eventstore.Store {
	views, sealed := store.(eventstore.SealedViews)
	if ReadsPersonalData(p) {
		sel, ok := p.(PersonalSelector)
		if ok && sealed {
			return views.OpeningOnly(sel.NeedsPersonalData)
		}
		return store
	}
	if sealed {
		return views.AsStored()
	}
	return store
}
