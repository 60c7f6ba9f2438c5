package httpapi_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestOpenAPIFitForGenerators: what client generators need of /v1/openapi.json: servers, a unique
// operationId on every operation, a type on every schema that is not a reference or a
// composition, one error schema for every JSON error answer, and no exclusive bounds (which ogen,
// whose client make test generates and runs in ops/goclient, cannot read).
func TestOpenAPIFitForGenerators(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if s, _ := doc["servers"].([]any); len(s) == 0 {
		t.Error("no servers")
	}
	ids := map[string]string{}
	for path, ops := range doc["paths"].(map[string]any) {
		for method, op := range ops.(map[string]any) {
			o, ok := op.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			id, _ := o["operationId"].(string)
			if id == "" {
				t.Errorf("%s %s has no operationId", method, path)
			} else if prev, dup := ids[id]; dup {
				t.Errorf("operationId %s on %s and %s %s", id, prev, method, path)
			}
			ids[id] = method + " " + path
			for code, res := range o["responses"].(map[string]any) {
				r := res.(map[string]any)
				if code[0] < '4' || r["$ref"] != nil {
					continue
				}
				content, _ := r["content"].(map[string]any)
				if c, ok := content["application/json"].(map[string]any); ok {
					if ref := c["schema"].(map[string]any)["$ref"]; ref != "#/components/schemas/Error" {
						t.Errorf("%s %s answers %s with schema %v, not the one Error schema", method, path, code, ref)
					}
				}
			}
		}
	}
	var check func(where string, v any)
	check = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["schema"].(map[string]any); ok {
				checkSchema(t, where+".schema", s)
			}
			for k, c := range v {
				if k != "schema" {
					check(where+"."+k, c)
				}
			}
		case []any:
			for _, c := range v {
				check(where, c)
			}
		}
	}
	check("paths", doc["paths"])
	for name, s := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		checkSchema(t, "components.schemas."+name, s.(map[string]any))
	}
}

func checkSchema(t *testing.T, where string, s map[string]any) {
	t.Helper()
	for _, k := range []string{"$ref", "type", "oneOf", "anyOf", "allOf"} {
		if s[k] != nil {
			goto children
		}
	}
	t.Errorf("%s has no type", strings.TrimPrefix(where, "."))
children:
	// ogen (the generator make test runs, ops/goclient) reads these as OpenAPI 3.0's booleans and
	// refuses 3.1's numbers: bounds are minimum/maximum, and the description says when exclusive.
	for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		if s[k] != nil {
			t.Errorf("%s uses %s, which ogen cannot read: use minimum/maximum", strings.TrimPrefix(where, "."), k)
		}
	}
	if ps, ok := s["properties"].(map[string]any); ok {
		for name, p := range ps {
			checkSchema(t, where+".properties."+name, p.(map[string]any))
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if c, ok := s[k].(map[string]any); ok {
			checkSchema(t, where+"."+k, c)
		}
	}
}
