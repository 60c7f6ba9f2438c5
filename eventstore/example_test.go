package eventstore_test

import (
	"fmt"

	"github.com/casebook/casebook/eventstore"
)

// Positions travel as "commit.prepare" (the Casebook-Position header) and order the global log.
func ExampleParsePosition() {
	a, _ := eventstore.ParsePosition("41.7")
	b, _ := eventstore.ParsePosition("42.3")
	fmt.Println(a, b, a.Less(b))
	_, err := eventstore.ParsePosition("42")
	fmt.Println(err)
	// Output:
	// 41.7 42.3 true
	// position "42": want commit.prepare
}

// AfterVersion is the append condition for an aggregate that has folded version events.
func ExampleAfterVersion() {
	fmt.Println(eventstore.AfterVersion(0), "|", eventstore.AfterVersion(3))
	// Output: no stream | revision 2
}
