package mcpserver

import (
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mailsink/mailsink/store"
)

// The tools' input schemas: inferred from the input types, with the
// bounds of the API, so that a client (and the model) sees them and the
// SDK refuses what breaks them before a tool runs.

func between(s *jsonschema.Schema, lo, hi float64) { s.Minimum, s.Maximum = &lo, &hi }

func length(s *jsonschema.Schema, lo, hi int) { s.MinLength, s.MaxLength = &lo, &hi }

var statuses = []any{string(store.StatusReceived), string(store.StatusProcessed), string(store.StatusArchived)}

func boundFilter(p map[string]*jsonschema.Schema) {
	p["recipient"].Format, p["sender"].Format = "email", "email"
	length(p["subject"], 1, maxSubjectFilter)
	p["status"].Enum = statuses
	length(p["label"], 1, maxLabel)
	p["since"].Format = "date-time"
}

func searchSchema() *jsonschema.Schema {
	return schemaFor[searchInput](func(p map[string]*jsonschema.Schema) {
		boundFilter(p)
		length(p["q"], 0, maxQuery)
		between(p["limit"], 1, maxLimit)
		p["before"].Format = "uuid"
	})
}

func getSchema() *jsonschema.Schema {
	return schemaFor[getInput](func(p map[string]*jsonschema.Schema) {
		p["id"].Format = "uuid"
		between(p["maxBodyBytes"], 1, maxBodyBytes)
	})
}

func waitSchema(link bool) *jsonschema.Schema {
	bound := func(p map[string]*jsonschema.Schema) {
		boundFilter(p)
		between(p["timeoutSeconds"], 1, MaxWaitSeconds)
	}
	if link {
		return schemaFor[waitLinkInput](func(p map[string]*jsonschema.Schema) {
			bound(p)
			length(p["linkContains"], 1, 1000)
		})
	}
	return schemaFor[waitInput](bound)
}

func idSchema() *jsonschema.Schema {
	return schemaFor[idInput](func(p map[string]*jsonschema.Schema) { p["id"].Format = "uuid" })
}

func deleteSchema() *jsonschema.Schema {
	return schemaFor[deleteInput](func(p map[string]*jsonschema.Schema) {
		boundFilter(p)
		length(p["q"], 0, maxQuery)
		n := maxDelete
		p["ids"].MaxItems = &n
		p["ids"].Items.Format = "uuid"
	})
}

func markSchema() *jsonschema.Schema {
	return schemaFor[markInput](func(p map[string]*jsonschema.Schema) {
		p["id"].Format = "uuid"
		p["status"].Enum = statuses
		n := maxLabels
		p["labels"].MaxItems = &n
		length(p["labels"].Items, 1, maxLabel)
		length(p["notes"], 0, maxNotes)
	})
}
