package domain_test

import (
	"fmt"

	"github.com/casebook/casebook/domain"
)

// The lifecycle graph: which edges exist and which need a reason.
func ExampleCanTransition() {
	for _, e := range [][2]domain.Status{
		{domain.StatusNew, domain.StatusTriaged},
		{domain.StatusInProgress, domain.StatusWaiting},
		{domain.StatusNew, domain.StatusResolved},
		{domain.StatusResolved, domain.StatusInProgress},
	} {
		ok, reason := domain.CanTransition(e[0], e[1])
		fmt.Printf("%s -> %s: allowed=%v reason=%v\n", e[0], e[1], ok, reason)
	}
	// Output:
	// new -> triaged: allowed=true reason=false
	// in_progress -> waiting: allowed=true reason=true
	// new -> resolved: allowed=false reason=false
	// resolved -> in_progress: allowed=true reason=false
}
