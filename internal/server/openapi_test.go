package server

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	fspb "github.com/warrenhq/warren/api/gen/filesystem"
	"github.com/warrenhq/warren/api/gen/process"
	"github.com/warrenhq/warren/client"
)

// openAPIGoTypes are the Go types the document's schemas name in
// x-go-type. Every JSON type of package client must be here (and so in
// the document).
var openAPIGoTypes = map[string]reflect.Type{
	"client.APIKey":              reflect.TypeFor[client.APIKey](),
	"client.TemplateDetail":      reflect.TypeFor[client.TemplateDetail](),
	"client.TemplateBuild":       reflect.TypeFor[client.TemplateBuild](),
	"client.TemplateParent":      reflect.TypeFor[client.TemplateParent](),
	"client.FleetNode":           reflect.TypeFor[client.FleetNode](),
	"client.FleetNodeAmount":     reflect.TypeFor[client.FleetNodeAmount](),
	"client.TeamLimits":          reflect.TypeFor[client.TeamLimits](),
	"client.TeamUsage":           reflect.TypeFor[client.TeamUsage](),
	"client.AutoResume":          reflect.TypeFor[client.AutoResume](),
	"client.Capabilities":        reflect.TypeFor[client.Capabilities](),
	"client.Diff":                reflect.TypeFor[client.Diff](),
	"client.DiffEntry":           reflect.TypeFor[client.DiffEntry](),
	"client.EntryInfo":           reflect.TypeFor[client.EntryInfo](),
	"client.Error":               reflect.TypeFor[client.Error](),
	"client.PlaneError":          reflect.TypeFor[client.PlaneError](),
	"client.ExecEvent":           reflect.TypeFor[client.ExecEvent](),
	"client.ExecRequest":         reflect.TypeFor[client.ExecRequest](),
	"client.ExecResult":          reflect.TypeFor[client.ExecResult](),
	"client.ForkRequest":         reflect.TypeFor[client.ForkRequest](),
	"client.ForkResult":          reflect.TypeFor[client.ForkResult](),
	"client.Health":              reflect.TypeFor[client.Health](),
	"client.HealthError":         reflect.TypeFor[client.HealthError](),
	"client.Limits":              reflect.TypeFor[client.Limits](),
	"client.Lineage":             reflect.TypeFor[client.Lineage](),
	"client.LineageEdge":         reflect.TypeFor[client.LineageEdge](),
	"client.LineageNode":         reflect.TypeFor[client.LineageNode](),
	"client.TerminalExit":        reflect.TypeFor[client.TerminalExit](),
	"client.LogEntry":            reflect.TypeFor[client.LogEntry](),
	"client.LogLine":             reflect.TypeFor[client.LogLine](),
	"client.MoveRequest":         reflect.TypeFor[client.MoveRequest](),
	"client.MoveResult":          reflect.TypeFor[client.MoveResult](),
	"client.Network":             reflect.TypeFor[client.Network](),
	"client.NetworkEvent":        reflect.TypeFor[client.NetworkEvent](),
	"client.NetworkPolicy":       reflect.TypeFor[client.NetworkPolicy](),
	"client.NetworkRule":         reflect.TypeFor[client.NetworkRule](),
	"client.EgressProxy":         reflect.TypeFor[client.EgressProxy](),
	"client.NetworkTransform":    reflect.TypeFor[client.NetworkTransform](),
	"client.Secret":              reflect.TypeFor[client.Secret](),
	"client.NewSecret":           reflect.TypeFor[client.NewSecret](),
	"client.SecretUpdate":        reflect.TypeFor[client.SecretUpdate](),
	"client.NewAPIKey":           reflect.TypeFor[client.NewAPIKey](),
	"client.NewSandbox":          reflect.TypeFor[client.NewSandbox](),
	"client.NewSnapshot":         reflect.TypeFor[client.NewSnapshot](),
	"client.NewVolume":           reflect.TypeFor[client.NewVolume](),
	"client.Volume":              reflect.TypeFor[client.Volume](),
	"client.VolumeAndToken":      reflect.TypeFor[client.VolumeAndToken](),
	"client.Device":              reflect.TypeFor[client.Device](),
	"client.VolumeEntry":         reflect.TypeFor[client.VolumeEntry](),
	"client.VolumeMetadata":      reflect.TypeFor[client.VolumeMetadata](),
	"client.VolumeMount":         reflect.TypeFor[client.VolumeMount](),
	"client.Pool":                reflect.TypeFor[client.Pool](),
	"client.PoolUsage":           reflect.TypeFor[client.PoolUsage](),
	"client.ProcessEvent":        reflect.TypeFor[client.ProcessEvent](),
	"client.ProcessInfo":         reflect.TypeFor[client.ProcessInfo](),
	"client.RollbackRequest":     reflect.TypeFor[client.RollbackRequest](),
	"client.RollbackResult":      reflect.TypeFor[client.RollbackResult](),
	"client.RuntimeInfo":         reflect.TypeFor[client.RuntimeInfo](),
	"client.Sandbox":             reflect.TypeFor[client.Sandbox](),
	"client.SandboxDetail":       reflect.TypeFor[client.SandboxDetail](),
	"client.SandboxEvent":        reflect.TypeFor[client.SandboxEvent](),
	"client.SandboxLogs":         reflect.TypeFor[client.SandboxLogs](),
	"client.SandboxMetric":       reflect.TypeFor[client.SandboxMetric](),
	"client.SignalRequest":       reflect.TypeFor[client.SignalRequest](),
	"client.Snapshot":            reflect.TypeFor[client.Snapshot](),
	"client.StartProcessRequest": reflect.TypeFor[client.StartProcessRequest](),
	"client.Template":            reflect.TypeFor[client.Template](),
	"client.Tool":                reflect.TypeFor[client.Tool](),
	"client.ToolCall":            reflect.TypeFor[client.ToolCall](),
	"client.ToolCallRecord":      reflect.TypeFor[client.ToolCallRecord](),
	"client.ToolEvent":           reflect.TypeFor[client.ToolEvent](),
	"client.ToolResult":          reflect.TypeFor[client.ToolResult](),

	"server.networkUpdate": reflect.TypeFor[networkUpdate](),
	"server.stopBody":      reflect.TypeFor[stopBody](),
	"server.timeoutBody":   reflect.TypeFor[timeoutBody](),
}

// openAPIDoc is the document as GET /openapi.json serves it.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	b, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

func testServer() *Server {
	return New(Deps{MCP: http.NotFoundHandler(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func TestOpenAPIServed(t *testing.T) {
	rec := httptest.NewRecorder()
	testServer().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil)) // no key
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("GET /openapi.json is not JSON: %v", err)
	}
	if !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(doc.OpenAPI) || doc.Paths["/sandboxes"] == nil {
		t.Fatalf("GET /openapi.json: openapi %q, %d paths", doc.OpenAPI, len(doc.Paths))
	}
	// The document has no nulls: one is a YAML slip, such as an unquoted
	// comma in a {flow: mapping}, which makes a key of what follows it.
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case nil:
			t.Errorf("api/openapi.yaml: %s is null", where)
		case map[string]any:
			for k, e := range v {
				walk(where+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", where, i), e)
			}
		}
	}
	walk("", openAPIDoc(t))
}

var openAPIMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// Every route the server registers is in the document, and every operation
// the document lists is served: by a registered route, or (paths marked
// x-warren-plane: sandbox) by the sandbox plane.
func TestOpenAPICoversRoutes(t *testing.T) {
	paths := openAPIDoc(t)["paths"].(map[string]any)
	registered := map[string]bool{}
	for _, p := range testServer().mux.patterns {
		if p == "/" { // the not-found answer
			continue
		}
		registered[p] = true
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "", p
		}
		item, _ := paths[path].(map[string]any)
		switch {
		case item == nil:
			t.Errorf("route %q is not in api/openapi.yaml", p)
		case method == "" && !slices.ContainsFunc(openAPIMethods, func(m string) bool { return item[m] != nil }):
			t.Errorf("route %q: api/openapi.yaml lists no operation of %s", p, path)
		case method != "" && item[strings.ToLower(method)] == nil:
			t.Errorf("route %q: api/openapi.yaml has %s but not its %s", p, path, method)
		}
	}
	for path, v := range paths {
		item := v.(map[string]any)
		for _, m := range openAPIMethods {
			if item[m] == nil {
				continue
			}
			op := strings.ToUpper(m) + " " + path
			if item["x-warren-plane"] == "sandbox" {
				if !isEnvdPath(examplePath(path, item)) {
					t.Errorf("api/openapi.yaml: %s is marked x-warren-plane: sandbox, but the sandbox plane does not serve it", op)
				}
				continue
			}
			if !registered[op] && !registered[path] {
				t.Errorf("api/openapi.yaml documents %s, which the server does not register", op)
			}
		}
	}
}

// The sandbox plane's RPC paths list every method of envd's services,
// and only those.
func TestOpenAPIEnvdMethods(t *testing.T) {
	paths := openAPIDoc(t)["paths"].(map[string]any)
	for _, svc := range []protoreflect.ServiceDescriptor{
		process.File_process_process_proto.Services().Get(0),
		fspb.File_filesystem_filesystem_proto.Services().Get(0),
	} {
		path := "/" + string(svc.FullName()) + "/{rpc}"
		item, _ := paths[path].(map[string]any)
		var documented []string
		params, _ := item["parameters"].([]any)
		for _, p := range params {
			if p, _ := p.(map[string]any); p["name"] == "rpc" {
				for _, v := range p["schema"].(map[string]any)["enum"].([]any) {
					documented = append(documented, fmt.Sprint(v))
				}
			}
		}
		var methods []string
		for i := range svc.Methods().Len() {
			methods = append(methods, string(svc.Methods().Get(i).Name()))
		}
		slices.Sort(documented)
		slices.Sort(methods)
		if !slices.Equal(documented, methods) {
			t.Errorf("api/openapi.yaml: %s lists rpc %v; the service has %v", path, documented, methods)
		}
	}
}

// examplePath fills a documented path's parameters with the first value
// their schema allows (or "x").
func examplePath(path string, item map[string]any) string {
	params, _ := item["parameters"].([]any)
	for _, p := range params {
		p, _ := p.(map[string]any)
		if p["in"] != "path" {
			continue
		}
		val := "x"
		if enum, _ := p["schema"].(map[string]any)["enum"].([]any); len(enum) > 0 {
			val = fmt.Sprint(enum[0])
		}
		path = strings.ReplaceAll(path, "{"+fmt.Sprint(p["name"])+"}", val)
	}
	return path
}

// Every schema that names a Go type (x-go-type) has that type's JSON
// fields, no more and no fewer, with their types; a field is required
// unless it is omitempty (in a schema only requests use, a field may be
// optional anyway: a decoder takes its absence as zero). And every JSON
// type of package client has a schema.
func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	doc := openAPIDoc(t)
	c := &schemaChecker{schemas: doc["components"].(map[string]any)["schemas"].(map[string]any), byType: map[reflect.Type]string{}}
	used := map[string]bool{}
	for name, s := range c.schemas {
		goName, _ := s.(map[string]any)["x-go-type"].(string)
		if goName == "" {
			continue
		}
		typ, ok := openAPIGoTypes[goName]
		if !ok {
			t.Errorf("schema %s: x-go-type %s is not in openAPIGoTypes", name, goName)
			continue
		}
		if other, dup := c.byType[typ]; dup {
			t.Errorf("schemas %s and %s both name %s", other, name, goName)
		}
		c.byType[typ] = name
		used[goName] = true
	}
	for goName := range openAPIGoTypes {
		if !used[goName] {
			t.Errorf("no schema of api/openapi.yaml has x-go-type: %s", goName)
		}
	}
	inRequests, inResponses := schemaUses(t, doc)
	for name := range c.schemas {
		if !inRequests[name] && !inResponses[name] {
			t.Errorf("schema %s is used by no operation", name)
		}
	}
	for typ, name := range c.byType {
		c.checkStruct(name, typ, inRequests[name] && !inResponses[name])
	}
	for _, e := range c.errs {
		t.Error(e)
	}
	for _, name := range clientJSONTypes(t) {
		if openAPIGoTypes["client."+name] == nil {
			t.Errorf("client.%s is a JSON type of the API but has no schema in api/openapi.yaml (and no entry in openAPIGoTypes)", name)
		}
	}
}

// schemaUses says which component schemas request bodies use and which
// answers use, directly or through other schemas.
func schemaUses(t *testing.T, doc map[string]any) (requests, responses map[string]bool) {
	components := doc["components"].(map[string]any)
	requests, responses = map[string]bool{}, map[string]bool{}
	var mark func(v any, into map[string]bool)
	mark = func(v any, into map[string]bool) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				mark(e, into)
			}
		case map[string]any:
			for k, e := range v {
				ref, _ := e.(string)
				if k != "$ref" || ref == "" {
					mark(e, into)
					continue
				}
				kind, name, _ := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
				group, _ := components[kind].(map[string]any)
				target := group[name]
				if target == nil {
					t.Errorf("api/openapi.yaml: $ref %s names nothing", ref)
					continue
				}
				if kind == "schemas" {
					if into[name] {
						continue
					}
					into[name] = true
				}
				mark(target, into)
			}
		}
	}
	for _, item := range doc["paths"].(map[string]any) {
		for _, m := range openAPIMethods {
			op, _ := item.(map[string]any)[m].(map[string]any)
			mark(op["requestBody"], requests)
			mark(op["responses"], responses)
		}
	}
	return requests, responses
}

// clientJSONTypes are the exported struct types of package client that
// have JSON tags.
func clientJSONTypes(t *testing.T) []string {
	files, err := filepath.Glob("../../client/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("client sources: %v", err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok || spec.Assign.IsValid() || !spec.Name.IsExported() {
				return true
			}
			st, ok := spec.Type.(*ast.StructType)
			if ok && slices.ContainsFunc(st.Fields.List, func(f *ast.Field) bool {
				return f.Tag != nil && strings.Contains(f.Tag.Value, `json:"`)
			}) {
				names = append(names, spec.Name.Name)
			}
			return false
		})
	}
	return names
}

type schemaChecker struct {
	schemas map[string]any
	byType  map[reflect.Type]string
	errs    []string
}

func (c *schemaChecker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// resolve follows a $ref to the schema it names.
func (c *schemaChecker) resolve(s map[string]any) map[string]any {
	if ref, ok := s["$ref"].(string); ok {
		target, _ := c.schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
		return target
	}
	return s
}

// object is an object schema's properties and required names, merged over
// allOf.
func (c *schemaChecker) object(s map[string]any) (props map[string]any, required map[string]bool) {
	props, required = map[string]any{}, map[string]bool{}
	var merge func(s map[string]any)
	merge = func(s map[string]any) {
		s = c.resolve(s)
		ps, _ := s["properties"].(map[string]any)
		for k, v := range ps {
			props[k] = v
		}
		rs, _ := s["required"].([]any)
		for _, r := range rs {
			required[fmt.Sprint(r)] = true
		}
		parts, _ := s["allOf"].([]any)
		for _, part := range parts {
			p, _ := part.(map[string]any)
			merge(p)
		}
	}
	merge(s)
	return props, required
}

func (c *schemaChecker) checkStruct(name string, typ reflect.Type, requestOnly bool) {
	props, required := c.object(c.schemas[name].(map[string]any))
	fields := jsonFields(typ)
	for _, f := range fields {
		where := fmt.Sprintf("%s.%s", name, f.name)
		p, ok := props[f.name].(map[string]any)
		if !ok {
			c.errorf("%s: %v has field %s, which the schema lacks", name, typ, f.name)
			continue
		}
		c.checkValue(where, p, f.typ)
		switch {
		case required[f.name] && f.omitempty:
			c.errorf("%s: required, but %v omits it when empty", where, typ)
		case !required[f.name] && !f.omitempty && !requestOnly:
			c.errorf("%s: always in %v's JSON, but not required", where, typ)
		}
	}
	for p := range props {
		if !slices.ContainsFunc(fields, func(f jsonField) bool { return f.name == p }) {
			c.errorf("%s: property %s is not a field of %v", name, p, typ)
		}
	}
	for r := range required {
		if props[r] == nil {
			c.errorf("%s: requires %s, which it does not define", name, r)
		}
	}
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawJSON  = reflect.TypeFor[json.RawMessage]()
)

// checkValue compares a property's schema with its field's Go type.
func (c *schemaChecker) checkValue(where string, s map[string]any, typ reflect.Type) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := func(typeName string, attrs ...string) {
		if s["type"] != typeName {
			c.errorf("%s: schema type %v, but the Go type %v is a JSON %s", where, s["type"], typ, typeName)
		}
		for i := 0; i+1 < len(attrs); i += 2 {
			if s[attrs[i]] != attrs[i+1] {
				c.errorf("%s: the Go type %v wants %s: %s", where, typ, attrs[i], attrs[i+1])
			}
		}
	}
	switch {
	case typ == rawJSON: // any JSON value
		return
	case typ == timeType:
		want("string", "format", "date-time")
		return
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		want("string", "contentEncoding", "base64")
		return
	}
	switch typ.Kind() {
	case reflect.String:
		want("string")
	case reflect.Bool:
		want("boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want("integer")
	case reflect.Float32, reflect.Float64:
		want("number")
	case reflect.Slice, reflect.Array:
		want("array")
		items, _ := s["items"].(map[string]any)
		c.checkValue(where+"[]", items, typ.Elem())
	case reflect.Map:
		want("object")
		values, _ := s["additionalProperties"].(map[string]any)
		c.checkValue(where+"{}", values, typ.Elem())
	case reflect.Struct:
		ref, _ := s["$ref"].(string)
		if name, ok := c.byType[typ]; !ok || ref != "#/components/schemas/"+name {
			c.errorf("%s: the Go type %v wants a $ref to the schema of x-go-type %v, not %q", where, typ, typ, ref)
		}
	default:
		c.errorf("%s: the Go type %v has no JSON schema here", where, typ)
	}
}

type jsonField struct {
	name      string
	typ       reflect.Type
	omitempty bool
	depth     int
}

// jsonFields are a struct's fields as encoding/json sees them: embedded
// structs flattened, a shallower field hiding a deeper one of its name.
func jsonFields(typ reflect.Type) []jsonField {
	var out []jsonField
	var walk func(typ reflect.Type, depth int)
	walk = func(typ reflect.Type, depth int) {
		for f := range typ.Fields() {
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
			if i := slices.IndexFunc(out, func(o jsonField) bool { return o.name == name }); i >= 0 {
				if out[i].depth > depth {
					out[i] = jsonField{name, f.Type, omit, depth}
				}
				continue
			}
			out = append(out, jsonField{name, f.Type, omit, depth})
		}
	}
	walk(typ, 0)
	return out
}
