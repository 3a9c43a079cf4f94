// Package api holds the mailsink API contract: the OpenAPI 3.1 document
// openapi.yaml, which /v1/openapi.json serves as JSON. The server's answers
// (httpapi's tests), the Go client's types (client's tests) and the JS
// client's types (generated from it) are all checked against this one file.
package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIYAML returns the document as written.
func OpenAPIYAML() []byte { return bytes.Clone(openAPIYAML) }

// OpenAPIJSON returns the document as JSON, members in the order of the
// YAML file. It panics when the embedded file does not convert, which its
// test rules out (as regexp.MustCompile does for a constant pattern).
func OpenAPIJSON() []byte {
	out, err := ToJSON(openAPIYAML)
	if err != nil {
		panic("api: openapi.yaml: " + err.Error())
	}
	return out
}

// ToJSON converts one YAML document to compact JSON, keeping the order of
// mapping keys. Keys must be plain scalars (a status code like 200 is the
// string "200", as in JSON); a duplicate key is an error naming its line.
func ToJSON(src []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, err
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, errors.New("not one YAML document")
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, root.Content[0], 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxDepth bounds the nesting of the document (and of aliases followed).
const maxDepth = 64

func writeJSON(buf *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nested deeper than %d", n.Line, maxDepth)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias, depth+1)
	case yaml.MappingNode:
		seen := make(map[string]bool, len(n.Content)/2)
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return fmt.Errorf("line %d: a key must be a plain scalar", k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("line %d: key %q repeated", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeScalar(buf, k.Value); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeJSON(buf, v, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, v, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str", "!!timestamp", "!!binary":
			return writeScalar(buf, n.Value)
		case "!!null":
			buf.WriteString("null")
			return nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		if err := writeScalar(buf, v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
	default:
		return fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	return nil
}

// writeScalar writes v as JSON without escaping <, > and &, which the
// document's descriptions hold.
func writeScalar(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}
