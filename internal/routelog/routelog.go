// Package routelog carries a request's route template from the router that matched it to the
// line that logs the request, across routers mounted inside one another (the console inside the
// API's).
package routelog

import "context"

type key struct{}

// With returns ctx carrying p, which Set fills in; the logging middleware reads *p afterwards.
func With(ctx context.Context, p *string) context.Context { return context.WithValue(ctx, key{}, p) }

// Set records template as the request's route; the innermost router's call is the last. It does
// nothing when ctx carries no With.
func Set(ctx context.Context, template string) {
	if p, ok := ctx.Value(key{}).(*string); ok && template != "" {
		*p = template
	}
}
