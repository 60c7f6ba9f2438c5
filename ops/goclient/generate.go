// Package goclient holds the Go client that ogen generates from Casebook's OpenAPI document
// (casebookapi) and the tests that keep it honest: TestGeneratedClientIsCurrent regenerates it and
// compares, TestGeneratedClientWalkthrough drives the README walk-through through it against a real
// server in the same process.
//
// It is a module of its own so that the generator and the client's runtime packages never become
// dependencies of Casebook itself. Regenerate after changing adapters/httpapi/openapi.json:
//
//	cd ops/goclient && go generate ./...
package goclient

//go:generate go tool ogen -config ogen.yml -package casebookapi -target casebookapi -clean ../../adapters/httpapi/openapi.json
