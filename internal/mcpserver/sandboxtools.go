package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/client"
)

// fallbackTools are the agent's tools by name, offered before the daemon has
// told us their schemas. Only the names live here: descriptions and
// schemas are the agent's (GET /tools).
var fallbackTools = []string{"bash", "read", "write", "edit", "ls", "glob", "grep", "apply_patch"}

// readOnlyTools change nothing in the sandbox; clients may auto-approve them.
var readOnlyTools = map[string]bool{"read": true, "ls": true, "glob": true, "grep": true}

// The arguments every sandbox tool takes besides the tool's own params.
const (
	argSandbox = "sandboxId"
	argTurn    = "turn"
)

var sandboxIDSchema = map[string]any{
	"type":        "string",
	"minLength":   1,
	"description": "The sandbox to act in: the sandboxId that sandbox_create (or fork) answered with.",
}

var turnSchema = map[string]any{
	"type":        "boolean",
	"description": "Take a turn snapshot of the sandbox right after this call; the answer names it. Use it to mark a point you may want to roll back to.",
}

// addFallbackTools offers the sandbox tools with a schema that only names
// sandboxId, so that a client started before the daemon still sees them.
func (s *server) addFallbackTools() {
	for _, name := range fallbackTools {
		s.mcp.AddTool(&mcp.Tool{
			Name: name,
			Description: fmt.Sprintf("Runs warren's %q tool inside a sandbox. Its parameter list could not be fetched from the warren daemon "+
				"(is `warren serve` running?): list the tools again to see it. Pass the tool's parameters as arguments next to sandboxId.", name),
			InputSchema: map[string]any{
				"type":                 "object",
				"properties":           map[string]any{argSandbox: sandboxIDSchema, argTurn: turnSchema},
				"required":             []string{argSandbox},
				"additionalProperties": true,
			},
			Annotations: annotations(name),
		}, s.callSandboxTool(name))
	}
}

// installSandboxTools offers the daemon's tools, each with its own schema
// plus sandboxId and turn, in place of the fallbacks.
func (s *server) installSandboxTools(tools []client.Tool) {
	seen := map[string]bool{}
	for _, t := range tools {
		if ownTools[t.Name] {
			s.log.Warn("the daemon's tool clashes with an MCP tool of the same name; not offered", "tool", t.Name)
			continue
		}
		schema, err := withSandboxArgs(t.Params)
		if err != nil {
			s.log.Warn("the daemon's tool has an unusable schema; offered without it", "tool", t.Name, "err", err)
			schema = map[string]any{
				"type":                 "object",
				"properties":           map[string]any{argSandbox: sandboxIDSchema, argTurn: turnSchema},
				"required":             []string{argSandbox},
				"additionalProperties": true,
			}
		}
		desc := strings.TrimSpace(t.Description)
		if desc != "" {
			desc += "\n\n"
		}
		desc += "Runs inside the sandbox named by sandboxId."
		s.mcp.AddTool(&mcp.Tool{Name: t.Name, Description: desc, InputSchema: schema, Annotations: annotations(t.Name)},
			s.callSandboxTool(t.Name))
		seen[t.Name] = true
	}
	var gone []string
	for _, name := range fallbackTools {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
}

// withSandboxArgs adds sandboxId (required) and turn to a tool's params
// schema, which must be a JSON Schema object.
func withSandboxArgs(params json.RawMessage) (map[string]any, error) {
	var schema map[string]any
	if err := json.Unmarshal(params, &schema); err != nil {
		return nil, fmt.Errorf("params schema: %w", err)
	}
	if schema["type"] != "object" {
		return nil, fmt.Errorf("params schema is of type %v, not object", schema["type"])
	}
	props := map[string]any{}
	if p, ok := schema["properties"].(map[string]any); ok {
		props = maps.Clone(p)
	} else if schema["properties"] != nil {
		return nil, fmt.Errorf("params schema's properties are not an object")
	}
	for _, name := range []string{argSandbox, argTurn} {
		if _, clash := props[name]; clash {
			return nil, fmt.Errorf("the tool has a parameter named %s", name)
		}
	}
	props[argSandbox] = sandboxIDSchema
	props[argTurn] = turnSchema
	out := maps.Clone(schema)
	out["properties"] = props
	required := []any{argSandbox}
	if r, ok := schema["required"].([]any); ok {
		required = append(required, r...)
	}
	out["required"] = required
	return out, nil
}

func annotations(tool string) *mcp.ToolAnnotations {
	if readOnlyTools[tool] {
		return &mcp.ToolAnnotations{ReadOnlyHint: true}
	}
	return nil
}

// callSandboxTool forwards a call to POST /sandboxes/{id}/tools/{name}:
// sandboxId and turn are taken out, the rest are the tool's params, checked
// by the daemon against the tool's schema.
func (s *server) callSandboxTool(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := map[string]json.RawMessage{}
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return errorResult("the arguments must be a JSON object: %v", err), nil
			}
		}
		var id string
		if raw, ok := args[argSandbox]; !ok {
			return errorResult("%s is required: the sandbox to run %s in (sandbox_create answers with one)", argSandbox, name), nil
		} else if err := json.Unmarshal(raw, &id); err != nil || id == "" {
			return errorResult("%s must be a non-empty string", argSandbox), nil
		}
		call := client.ToolCall{}
		if raw, ok := args[argTurn]; ok {
			if err := json.Unmarshal(raw, &call.Turn); err != nil {
				return errorResult("%s must be true or false", argTurn), nil
			}
		}
		delete(args, argSandbox)
		delete(args, argTurn)
		params, err := json.Marshal(args)
		if err != nil {
			return errorResult("encode params: %v", err), nil
		}
		call.Params = params
		res, err := s.c.Tools.Call(ctx, id, name, call, progressFunc(ctx, req))
		if err != nil {
			return clientErrorResult(err), nil
		}
		return &mcp.CallToolResult{Content: text(toolText(res)), IsError: res.IsError}, nil
	}
}

// progressFunc streams the call (bash's output as it comes) as progress
// notifications when the client asked for them with a progress token.
func progressFunc(ctx context.Context, req *mcp.CallToolRequest) func([]byte) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	var sent float64
	return func(chunk []byte) {
		sent += float64(len(chunk))
		// Best effort: a lost notification must not fail the call.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      sent,
			Message:       strings.ToValidUTF8(string(chunk), "\uFFFD"),
		})
	}
}

// toolText is what the model reads of a tool's result: its content, and
// the snapshot taken after it, if one was asked for.
func toolText(r client.ToolResult) string {
	out := r.Content
	note := ""
	switch {
	case r.SnapshotID != "":
		note = fmt.Sprintf("[snapshot %s taken after this call]", r.SnapshotID)
	case r.SnapshotError != "":
		note = fmt.Sprintf("[the snapshot after this call failed: %s]", r.SnapshotError)
	}
	if note != "" {
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += note
	}
	return out
}
