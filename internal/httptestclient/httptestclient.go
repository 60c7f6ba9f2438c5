// Package httptestclient is the tests' client of the JSON API: one request, its status and its
// body decoded as a JSON object. Only tests import it.
package httptestclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Client sends requests to Base ("http://127.0.0.1:…") with http.DefaultClient.
type Client struct {
	Base string
}

// Request is one API call. Every request says Content-Type: application/json; Token, when not
// empty, is sent as a bearer token, and Header's entries as they are.
type Request struct {
	Method, Path, Token, Body string
	Header                    map[string]string
}

// Do sends r and returns its status and its body as a JSON object (nil when it is not one).
func (c Client) Do(ctx context.Context, r Request) (int, map[string]any, error) {
	code, raw, err := c.Raw(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return code, m, nil
}

// Raw sends r and returns its status and its body as it came.
func (c Client) Raw(ctx context.Context, r Request) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, c.Base+r.Path, strings.NewReader(r.Body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, err
	}
	return res.StatusCode, raw, nil
}

// Call is Do under t's context, failing t when the request cannot be sent.
func (c Client) Call(t testing.TB, r Request) (int, map[string]any) {
	t.Helper()
	code, m, err := c.Do(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	return code, m
}
