package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

func TestSchemasMatchParamStructs(t *testing.T) {
	for _, tl := range catalogue() {
		var s struct {
			Type                 string                     `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(tl.schema, &s); err != nil {
			t.Fatalf("%s: schema is not JSON: %v", tl.name, err)
		}
		if s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties || len(s.Properties) != len(tl.params) {
			t.Errorf("%s: schema %s", tl.name, tl.schema)
		}
		if len(tl.description) < 100 {
			t.Errorf("%s: description too thin for a model: %q", tl.name, tl.description)
		}
		// Every param, set to a value of its type, decodes into the tool's
		// struct: the schema and the struct agree.
		sample := map[string]any{}
		for _, p := range tl.params {
			var prop struct {
				Description string `json:"description"`
			}
			_ = json.Unmarshal(s.Properties[p.name], &prop)
			if prop.Description == "" {
				t.Errorf("%s.%s has no description", tl.name, p.name)
			}
			switch p.kind {
			case kString:
				sample[p.name] = "x"
			case kInteger:
				sample[p.name] = p.min
			case kBoolean:
				sample[p.name] = true
			case kStringMap:
				sample[p.name] = map[string]string{"A": "b"}
			}
		}
		raw, _ := json.Marshal(sample)
		checked, err := check(tl.name, tl.params, raw)
		if err != nil {
			t.Fatalf("%s: sample refused: %v", tl.name, err)
		}
		if err := tl.decode(checked); err != nil {
			t.Errorf("%s: the params struct lacks a schema field: %v", tl.name, err)
		}
	}
}

func TestBadCalls(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		tool   string
		params string
		user   string
		code   connect.Code
		want   []string
	}{
		{"nope", `{}`, "", connect.CodeNotFound, []string{`no tool "nope"`, "apply_patch, bash, edit, glob, grep, ls, read, write"}},
		{"read", `{"path":"a","bogus":1}`, "", connect.CodeInvalidArgument, []string{`unknown field "bogus"`, "path (required), offset, limit"}},
		{"read", `{}`, "", connect.CodeInvalidArgument, []string{"params.path is required"}},
		{"read", `{"path":""}`, "", connect.CodeInvalidArgument, []string{"params.path must not be empty"}},
		{"read", `{"path":"a","offset":"3"}`, "", connect.CodeInvalidArgument, []string{"params.offset must be an integer, got a string"}},
		{"read", `{"path":"a","offset":1.5}`, "", connect.CodeInvalidArgument, []string{"params.offset must be an integer, got 1.5"}},
		{"read", `{"path":"a","limit":0}`, "", connect.CodeInvalidArgument, []string{"params.limit must be at least 1, got 0"}},
		{"grep", `{"pattern":"x","contextLines":21}`, "", connect.CodeInvalidArgument, []string{"params.contextLines must be at most 20"}},
		{"bash", `{"command":"true","env":{"A":1}}`, "", connect.CodeInvalidArgument, []string{"params.env.A must be a string, got a number"}},
		{"edit", `{"path":"a","oldString":"x","newString":"y","replaceAll":"yes"}`, "", connect.CodeInvalidArgument, []string{"params.replaceAll must be true or false"}},
		{"write", `[1]`, "", connect.CodeInvalidArgument, []string{"params must be a JSON object, got an array"}},
		{"write", `{"path":"a"`, "", connect.CodeInvalidArgument, []string{"params are not valid JSON"}},
		{"ls", `{}`, "ghost", connect.CodeInvalidArgument, []string{`user "ghost" does not exist`}},
	} {
		_, err := e.s.Run(context.Background(), Request{Tool: tc.tool, Params: []byte(tc.params), User: tc.user}, nil)
		if connect.CodeOf(err) != tc.code {
			t.Errorf("%s %s: code %v (%v), want %v", tc.tool, tc.params, connect.CodeOf(err), err, tc.code)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: %q does not mention %q", tc.tool, tc.params, err, w)
			}
		}
	}
	// null means absent, and no params at all is {}.
	if _, err := e.s.Run(context.Background(), Request{Tool: "ls", Params: []byte(`{"path":null,"depth":null}`)}, nil); err != nil {
		t.Errorf("nulls: %v", err)
	}
	if _, err := e.s.Run(context.Background(), Request{Tool: "ls"}, nil); err != nil {
		t.Errorf("no params: %v", err)
	}
}
