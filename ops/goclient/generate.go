// Package goclient proves that Casebook's OpenAPI document makes a working Go client: go generate
// runs ogen (pinned by this module's tool directive) on adapters/httpapi/openapi.json into
// casebookapi, which is not committed, so it is always the document of the tree at hand;
// TestGeneratedClientWalkthrough compiles against it and drives the README walk-through through it
// against a real server in the same process. make test (and so CI) generates before it tests:
//
//	cd ops/goclient && go generate ./... && go test ./...
//
// It is a module of its own so that the generator and the client's runtime packages never become
// dependencies of Casebook itself.
package goclient

//go:generate go tool ogen -loglevel error -config ogen.yml -package casebookapi -target casebookapi -clean ../../adapters/httpapi/openapi.json
