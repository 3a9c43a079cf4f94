package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// OpenAPI is the API contract (api/openapi.yaml as JSON) with a JSON Schema
// 2020-12 compiler over it (OpenAPI 3.1 schemas are JSON Schema), to check
// real requests and answers against it.
type OpenAPI struct {
	Doc      map[string]any
	compiler *jsonschema.Compiler

	mu sync.Mutex
	// exercised records the operations checked, as "GET /v1/emails".
	exercised map[string]bool
	// compiled holds the schemas compiled so far, by pointer: the compiler
	// is not safe for concurrent use, a compiled schema is.
	compiled map[string]*jsonschema.Schema
}

const openAPIURL = "mem:///openapi.json"

// NewOpenAPI reads a served or embedded OpenAPI document.
func NewOpenAPI(t testing.TB, doc []byte) *OpenAPI {
	t.Helper()
	o := &OpenAPI{exercised: map[string]bool{}, compiled: map[string]*jsonschema.Schema{}}
	if err := json.Unmarshal(doc, &o.Doc); err != nil {
		t.Fatal(err)
	}
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	o.compiler = jsonschema.NewCompiler()
	o.compiler.DefaultDraft(jsonschema.Draft2020)
	if err := o.compiler.AddResource(openAPIURL, schemaDoc); err != nil {
		t.Fatal(err)
	}
	return o
}

// Exercised reports whether Check has seen an answer of the operation
// "METHOD template".
func (o *OpenAPI) Exercised(op string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.exercised[op]
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func (o *OpenAPI) operation(method, template string) (map[string]any, bool) {
	item, _ := o.Doc["paths"].(map[string]any)[template].(map[string]any)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	return op, ok
}

// Check validates resp, the answer to method on the documented path
// template, against the document: the status must be documented, the
// content type too, and a JSON body must match its schema. It reports with
// t.Errorf only, so it may run on any goroutine.
func (o *OpenAPI) Check(t testing.TB, method, template string, resp *Response) {
	t.Helper()
	op, ok := o.operation(method, template)
	if !ok {
		t.Errorf("%s %s is not documented", method, template)
		return
	}
	o.mu.Lock()
	o.exercised[method+" "+template] = true
	o.mu.Unlock()
	status := strconv.Itoa(resp.Status)
	r, ok := op["responses"].(map[string]any)[status].(map[string]any)
	if !ok {
		t.Errorf("%s %s answered %s, which is not documented: %s", method, template, status, resp.Body)
		return
	}
	pointer := "#/paths/" + escapePointer(template) + "/" + strings.ToLower(method) + "/responses/" + status
	if ref, ok := r["$ref"].(string); ok {
		pointer = ref
		name := strings.TrimPrefix(ref, "#/components/responses/")
		r = o.Doc["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
	}
	content, _ := r["content"].(map[string]any)
	if len(content) == 0 {
		if len(resp.Body) != 0 {
			t.Errorf("%s %s %s: documented without content, answered %q", method, template, status, resp.Body)
		}
		return
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if _, ok := content[mt]; !ok && content["application/octet-stream"] == nil {
		t.Errorf("%s %s %s: content type %q is not documented", method, template, status, mt)
		return
	}
	if mt != "application/json" {
		return
	}
	o.validate(t, pointer+"/content/application~1json/schema", resp.Body, method+" "+template+" "+status+": the answer")
}

// RequestError validates a JSON request body sent to method on the
// documented path template against the operation's requestBody schema, and
// returns why it does not match (nil when it does).
func (o *OpenAPI) RequestError(method, template string, body []byte) error {
	op, ok := o.operation(method, template)
	if !ok {
		return fmt.Errorf("%s %s is not documented", method, template)
	}
	rb, _ := op["requestBody"].(map[string]any)
	content, _ := rb["content"].(map[string]any)
	if content["application/json"] == nil {
		return fmt.Errorf("%s %s: sent a JSON body, but the document describes none", method, template)
	}
	pointer := "#/paths/" + escapePointer(template) + "/" + strings.ToLower(method) + "/requestBody/content/application~1json/schema"
	sch, err := o.schema(pointer)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// schema compiles the schema at pointer once.
func (o *OpenAPI) schema(pointer string) (*jsonschema.Schema, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if sch, ok := o.compiled[pointer]; ok {
		return sch, nil
	}
	sch, err := o.compiler.Compile(openAPIURL + pointer)
	if err == nil {
		o.compiled[pointer] = sch
	}
	return sch, err
}

func (o *OpenAPI) validate(t testing.TB, pointer string, body []byte, what string) {
	t.Helper()
	sch, err := o.schema(pointer)
	if err != nil {
		t.Errorf("%s: compile %s: %v", what, pointer, err)
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s is not JSON: %v", what, err)
		return
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s does not match the document: %v\n%s", what, err, body)
	}
}

// Template returns the documented path template that path (a URL's path)
// falls under: the one with the fewest parameters when several match, so
// /v1/emails/count is not /v1/emails/{emailId}.
func (o *OpenAPI) Template(path string) (string, bool) {
	parts := strings.Split(path, "/")
	best, bestParams := "", -1
	for template := range o.Doc["paths"].(map[string]any) {
		tparts := strings.Split(template, "/")
		if len(tparts) != len(parts) {
			continue
		}
		params := 0
		for i, tp := range tparts {
			if strings.HasPrefix(tp, "{") && strings.HasSuffix(tp, "}") && parts[i] != "" {
				params++
			} else if tp != parts[i] {
				params = -1
				break
			}
		}
		if params >= 0 && (bestParams < 0 || params < bestParams) {
			best, bestParams = template, params
		}
	}
	return best, bestParams >= 0
}

// Transport returns an http.RoundTripper that checks every request sent
// through it and its answer against the document: the operation must be
// documented, the answer must be documented (Check), and a JSON request
// body the schema refuses must get a 4xx. Event streams pass unchecked.
func (o *OpenAPI) Transport(t testing.TB) http.RoundTripper {
	return checkingTransport{o: o, t: t}
}

type checkingTransport struct {
	o *OpenAPI
	t testing.TB
}

func (c checkingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	template, ok := c.o.Template(req.URL.Path)
	if !ok {
		c.t.Errorf("%s %s: no documented path", req.Method, req.URL.Path)
	}
	var refused error
	if ok && req.Body != nil && strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		refused = c.o.RequestError(req.Method, template, body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !ok || resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp, err
	}
	if refused != nil && resp.StatusCode < 400 {
		c.t.Errorf("%s %s answered %d to a request the document refuses: %v", req.Method, template, resp.StatusCode, refused)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	c.o.Check(c.t, req.Method, template, &Response{Status: resp.StatusCode, Header: resp.Header, Body: body})
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}
