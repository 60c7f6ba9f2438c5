package projections

import "github.com/casebook/casebook/eventstore"

// PersonalReader is how a projection declares whether it reads personal members of events
// (domain.PersonalFields: requester, subject, message, external id, note bodies). One that does not
// receives the events as stored (eventstore.SealedReader): nothing is decrypted for it, and it
// never holds personal data. A projection that declares nothing gets opened events, as it always
// did: the choice fails safe for its output, and every projection Casebook runs declares one
// (app.TestEveryProjectionDeclaresPersonalData).
type PersonalReader interface {
	ReadsPersonalData() bool
}

// ReadsPersonalData reports what p declares; true when it declares nothing.
func ReadsPersonalData(p Projection) bool {
	d, ok := p.(PersonalReader)
	return !ok || d.ReadsPersonalData()
}

// source is the log as p reads it: as stored when p reads no personal member and store can say so.
func source(store eventstore.Store, p Projection) eventstore.Store {
	if ReadsPersonalData(p) {
		return store
	}
	if s, ok := store.(eventstore.SealedReader); ok {
		return s.AsStored()
	}
	return store
}
