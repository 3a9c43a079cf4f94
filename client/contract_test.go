package client_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/api"
	"github.com/mailsink/mailsink/client"
)

// TestTypesMatchTheContract checks each exported type of the client that
// goes over the wire against its schema in api/openapi.yaml: every field is a
// property of the schema with a compatible type, every required property of
// the schema is a field, and a property that may be null is a pointer (or a
// slice or map), so that the client neither drops nor invents anything the
// server sends. A new wire type of the client gets a row here.
func TestTypesMatchTheContract(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPIJSON(), &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, tc := range []struct {
		v      any
		schema string
	}{
		{client.Account{}, "Account"},
		{client.Email{}, "EmailSummary"},
		{client.Stats{}, "EmailStats"},
		{client.EmailDetail{}, "EmailDetail"},
		{client.Body{}, "StoredEmailBody"},
		{client.Truncation{}, "Truncation"},
		{client.Attachment{}, "StoredEmailAttachment"},
		{client.Link{}, "EmailLink"},
		{client.NewEmail{}, "CreateEmailRequest"},
		{client.HTMLCheck{}, "HTMLCheckResponse"},
		{client.HTMLWarning{}, "HTMLCompatWarning"},
		{client.ClientSupport{}, "EmailClientSupport"},
		{client.CheckScore{}, "CheckScore"},
		{client.LinkCheck{}, "LinkCheckResponse"},
		{client.LinkStatus{}, "LinkCheckItem"},
		{client.SpamCheck{}, "SpamCheckResponse"},
		{client.SpamRule{}, "SpamRule"},
		{client.AuthCheck{}, "AuthCheckResponse"},
		{client.Reply{}, "ReleaseReply"},
		{client.ReleaseResult{}, "ReleaseResult"},
	} {
		typ := reflect.TypeOf(tc.v)
		if schemas[tc.schema] == nil {
			t.Errorf("client.%s: no schema %s in the document", typ.Name(), tc.schema)
			continue
		}
		c := contract{t: t, schemas: schemas}
		c.compare("client."+typ.Name(), typ, map[string]any{"$ref": "#/components/schemas/" + tc.schema})
	}
}

type contract struct {
	t       *testing.T
	schemas map[string]any
}

// shape is a schema with its $ref, allOf and nullable forms resolved.
type shape struct {
	types      []string // JSON types, "null" left out
	nullable   bool
	format     string
	properties map[string]any
	required   []string
	items      any // an array's item schema
	values     any // an object's additionalProperties schema
}

func (c contract) resolve(s any) shape {
	m, _ := s.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		return c.resolve(c.schemas[strings.TrimPrefix(ref, "#/components/schemas/")])
	}
	var out shape
	if all, ok := m["allOf"].([]any); ok {
		out.properties = map[string]any{}
		for _, part := range all {
			p := c.resolve(part)
			out.types = p.types
			for k, v := range p.properties {
				out.properties[k] = v
			}
			out.required = append(out.required, p.required...)
		}
		return out
	}
	if one, ok := m["oneOf"].([]any); ok {
		for _, alt := range one {
			if a, _ := alt.(map[string]any); a["type"] == "null" {
				out.nullable = true
				continue
			}
			nullable := out.nullable
			out = c.resolve(alt)
			out.nullable = out.nullable || nullable
		}
		return out
	}
	switch typ := m["type"].(type) {
	case string:
		out.types = []string{typ}
	case []any:
		for _, x := range typ {
			if x == "null" {
				out.nullable = true
			} else {
				out.types = append(out.types, x.(string))
			}
		}
	}
	if len(out.types) == 0 {
		switch m["const"].(type) {
		case bool:
			out.types = []string{"boolean"}
		case string:
			out.types = []string{"string"}
		}
		if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
			if _, ok := enum[0].(string); ok {
				out.types = []string{"string"}
			}
		}
	}
	out.format, _ = m["format"].(string)
	out.properties, _ = m["properties"].(map[string]any)
	for _, r := range asSlice(m["required"]) {
		out.required = append(out.required, r.(string))
	}
	out.items = m["items"]
	out.values = m["additionalProperties"]
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

var timeType = reflect.TypeFor[time.Time]()

func (c contract) compare(at string, typ reflect.Type, schema any) {
	t := c.t
	t.Helper()
	s := c.resolve(schema)
	if s.nullable {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
		default:
			t.Errorf("%s is %s, but the document lets it be null: make it a pointer", at, typ)
		}
	}
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := func(jsonType string) {
		if !slices.Contains(s.types, jsonType) {
			t.Errorf("%s is %s, which holds a JSON %s; the document says %v", at, typ, jsonType, s.types)
		}
	}
	switch {
	case typ == timeType:
		want("string")
		if s.format != "date-time" {
			t.Errorf("%s is a time.Time, but the document's string has format %q, not date-time", at, s.format)
		}
	case typ.Kind() == reflect.String:
		want("string")
	case typ.Kind() == reflect.Bool:
		want("boolean")
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Uint64:
		want("integer")
	case typ.Kind() == reflect.Float32 || typ.Kind() == reflect.Float64:
		if !slices.Contains(s.types, "number") {
			want("integer")
		}
	case typ.Kind() == reflect.Slice:
		want("array")
		c.compare(at+"[]", typ.Elem(), s.items)
	case typ.Kind() == reflect.Map:
		want("object")
		if s.values == nil {
			t.Errorf("%s is a map, but the document gives its values no schema (additionalProperties)", at)
			return
		}
		c.compare(at+"[key]", typ.Elem(), s.values)
	case typ.Kind() == reflect.Struct:
		want("object")
		fields := jsonFields(typ)
		for name, f := range fields {
			prop, ok := s.properties[name]
			if !ok {
				t.Errorf("%s.%s (json %q) is not a property of the document's schema", at, f.Name, name)
				continue
			}
			c.compare(at+"."+f.Name, f.Type, prop)
		}
		for _, name := range s.required {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s has no field for %q, which the document requires", at, name)
			}
		}
	default:
		t.Errorf("%s: type %s is not checked", at, typ)
	}
}

// jsonFields returns the fields encoding/json reads of a struct, by JSON
// name, embedded structs' fields included.
func jsonFields(typ reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}
