package api_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/mailsink/mailsink/api"
)

// TestServedDocumentIsTheYAML checks that the JSON served at
// /v1/openapi.json says what openapi.yaml says, member for member and in
// its order.
func TestServedDocumentIsTheYAML(t *testing.T) {
	t.Parallel()
	served := api.OpenAPIJSON()
	var fromJSON, fromYAML any
	if err := json.Unmarshal(served, &fromJSON); err != nil {
		t.Fatalf("the served document is not JSON: %v", err)
	}
	if err := yaml.Unmarshal(api.OpenAPIYAML(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(fromYAML), fromJSON) {
		t.Error("the served JSON differs from openapi.yaml")
	}
	if !bytes.HasPrefix(served, []byte(`{"openapi":"3.1.0","info":{"title":"mailsink API"`)) {
		t.Errorf("the served document starts %.60s; want the YAML's order", served)
	}
}

// normalize turns yaml.v3's values into encoding/json's: float64 numbers.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = normalize(x)
		}
	case []any:
		for i, x := range v {
			v[i] = normalize(x)
		}
	case int:
		return float64(v)
	}
	return v
}

// TestDocumentHoldsTogether checks what a reader of the document relies
// on: each operation has a unique operationId and documents its answers,
// each $ref points at something, and each schema compiles as JSON Schema
// 2020-12 (OpenAPI 3.1's dialect).
func TestDocumentHoldsTogether(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPIJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			op := op.(map[string]any)
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s %s has no operationId", method, path)
			} else if prev, dup := ids[id]; dup {
				t.Errorf("operationId %s names %s %s and %s", id, method, path, prev)
			}
			ids[id] = method + " " + path
			if r, _ := op["responses"].(map[string]any); len(r) == 0 {
				t.Errorf("%s %s documents no answer", method, path)
			}
		}
	}

	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPIJSON()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const base = "mem:///openapi.json"
	if err := c.AddResource(base, schemaDoc); err != nil {
		t.Fatal(err)
	}
	for name := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		if _, err := c.Compile(base + "#/components/schemas/" + name); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	}
	var refs func(at string, v any)
	refs = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && !resolves(doc, ref) {
				t.Errorf("%s: $ref %s points at nothing", at, ref)
			}
			for k, x := range v {
				refs(at+"/"+k, x)
			}
		case []any:
			for _, x := range v {
				refs(at, x)
			}
		}
	}
	refs("#", doc)
}

func resolves(doc map[string]any, ref string) bool {
	if !strings.HasPrefix(ref, "#/") {
		return false
	}
	var at any = doc
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := at.(map[string]any)
		if !ok {
			return false
		}
		if at, ok = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(part)]; !ok {
			return false
		}
	}
	return true
}

func TestToJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, err string }{
		{in: "b: 1\na: [x, 2.5, true, null]\n", want: `{"b":1,"a":["x",2.5,true,null]}`},
		{in: "'200': {description: <ok> & fine}\n404: {}\n", want: `{"200":{"description":"<ok> & fine"},"404":{}}`},
		{in: "d: 2026-11-01\nv: 1.0.0\nq: 'yes'\ny: yes\n", want: `{"d":"2026-11-01","v":"1.0.0","q":"yes","y":"yes"}`},
		{in: "x: &a {k: 1}\ny: *a\n", want: `{"x":{"k":1},"y":{"k":1}}`},
		{in: "a: 1\na: 2\n", err: `line 2: key "a" repeated`},
		{in: "a: [\n", err: "line"},
	} {
		got, err := api.ToJSON([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ToJSON(%q) = %s, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("ToJSON(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
