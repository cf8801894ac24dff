package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/client"
)

// ownTools are the tools this server defines itself (the others are the
// agent's); a daemon tool of the same name is not offered.
var ownTools = map[string]bool{
	"sandbox_create": true, "sandbox_list": true, "sandbox_kill": true,
	"snapshot": true, "rollback": true, "fork": true, "diff": true,
}

// maxListed bounds sandbox_list's answer.
const maxListed = 500

// maxDiffText bounds diff's answer; past it, the listing is cut with a note.
const maxDiffText = 64 << 10

type createArgs struct {
	Template              string            `json:"template,omitempty" jsonschema:"The template (root filesystem) to start from. Default: base."`
	TimeoutSeconds        *int64            `json:"timeoutSeconds,omitempty" jsonschema:"Seconds until warren stops the sandbox by itself. Default 300; 0 keeps it until sandbox_kill (unless the server was started with --allow-no-timeout=false)."`
	Metadata              map[string]string `json:"metadata,omitempty" jsonschema:"Labels to find the sandbox by later (sandbox_list filters on them)."`
	Envs                  map[string]string `json:"envs,omitempty" jsonschema:"Environment variables every command in the sandbox sees."`
	SnapshotEveryToolCall bool              `json:"snapshotEveryToolCall,omitempty" jsonschema:"Take a turn snapshot after every tool call in this sandbox, as if each passed turn: true."`
}

type listArgs struct {
	Metadata map[string]string `json:"metadata,omitempty" jsonschema:"Only the sandboxes whose metadata holds all of these pairs."`
}

type sandboxArgs struct {
	SandboxID string `json:"sandboxId" jsonschema:"The sandbox's id, as sandbox_create or sandbox_list gave it."`
}

type snapshotArgs struct {
	SandboxID string `json:"sandboxId" jsonschema:"The sandbox to snapshot."`
	Name      string `json:"name,omitempty" jsonschema:"A name to remember the snapshot by (e.g. before-refactor)."`
}

type rollbackArgs struct {
	SandboxID  string `json:"sandboxId" jsonschema:"The sandbox to roll back."`
	SnapshotID string `json:"snapshotId" jsonschema:"The snapshot to go back to: an id that snapshot or a call with turn: true answered with. It must be a snapshot of this sandbox."`
	Force      bool   `json:"force,omitempty" jsonschema:"Roll back even while commands are running in the sandbox (they are killed)."`
}

type forkArgs struct {
	SandboxID  string `json:"sandboxId" jsonschema:"The sandbox to copy."`
	SnapshotID string `json:"snapshotId,omitempty" jsonschema:"Copy this snapshot of the sandbox instead of its current state."`
	Count      int    `json:"count,omitempty" jsonschema:"How many copies to start. Default 1."`
}

type diffArgs struct {
	From string `json:"from" jsonschema:"The snapshot id to compare from."`
	To   string `json:"to,omitempty" jsonschema:"The snapshot id to compare to. Default: the current files of the sandbox that 'from' was taken of."`
}

func (s *server) addOwnTools() {
	f := false
	t := true
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "sandbox_create",
		Description: "Starts a new isolated Linux sandbox and answers with its sandboxId. " +
			"Pass that sandboxId to bash, read, write, edit, ls, glob, grep and apply_patch to work inside it. " +
			"Create one sandbox per task and reuse it across calls; kill it with sandbox_kill when done.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &f},
	}, s.sandboxCreate)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "sandbox_list",
		Description: "Lists the sandboxes that exist, one per line: id, template, state, start time and metadata. Use it to find a sandbox created earlier.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.sandboxList)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "sandbox_kill",
		Description: "Kills a sandbox and removes it with its files. Its snapshots stay usable for diff. Call it when you no longer need the sandbox.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &t},
	}, s.sandboxKill)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "snapshot",
		Description: "Saves the sandbox's files as they are now and answers with the snapshot's id. " +
			"Take one before a risky change: rollback returns to it, fork starts copies from it, diff shows what changed since.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &f},
	}, s.snapshot)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "rollback",
		Description: "Replaces the sandbox's files with a snapshot of it, undoing every change made since. " +
			"Running processes are restarted, so background servers must be started again.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &t},
	}, s.rollback)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "fork",
		Description: "Starts new sandboxes that are copies of a sandbox (its current files, or one of its snapshots) and answers with their sandboxIds. " +
			"Use it to try several approaches side by side; the original is untouched.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &f},
	}, s.fork)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "diff",
		Description: "Lists the files added, modified and removed between a snapshot and the sandbox's current files (or another snapshot), " +
			"with a unified diff for small text files.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.diff)
}

func (s *server) sandboxCreate(ctx context.Context, _ *mcp.CallToolRequest, in createArgs) (*mcp.CallToolResult, any, error) {
	sb, err := s.c.Sandboxes.Create(ctx, client.NewSandbox{
		TemplateID:            in.Template,
		Timeout:               in.TimeoutSeconds,
		Metadata:              in.Metadata,
		EnvVars:               in.Envs,
		SnapshotEveryToolCall: in.SnapshotEveryToolCall,
	})
	if err != nil {
		return clientErrorResult(err), nil, nil
	}
	return textResult("Created sandbox %s from template %s.\nsandboxId: %s", sb.SandboxID, sb.TemplateID, sb.SandboxID), nil, nil
}

func (s *server) sandboxList(ctx context.Context, _ *mcp.CallToolRequest, in listArgs) (*mcp.CallToolResult, any, error) {
	var all []client.ListedSandbox
	opts := client.ListOptions{Metadata: in.Metadata}
	for {
		page, next, err := s.c.Sandboxes.List(ctx, opts)
		if err != nil {
			return clientErrorResult(err), nil, nil
		}
		all = append(all, page...)
		if next == "" || len(all) >= maxListed {
			break
		}
		opts.NextToken = next
	}
	if len(all) == 0 {
		return textResult("No sandboxes."), nil, nil
	}
	var b strings.Builder
	for i, sb := range all {
		if i == maxListed {
			fmt.Fprintf(&b, "[only the first %d are listed]\n", maxListed)
			break
		}
		fmt.Fprintf(&b, "%s  template=%s  state=%s  started=%s", sb.SandboxID, sb.TemplateID, sb.State, sb.StartedAt.UTC().Format(time.RFC3339))
		if sb.ForkedFrom != "" {
			fmt.Fprintf(&b, "  forkedFrom=%s", sb.ForkedFrom)
		}
		if len(sb.Metadata) > 0 {
			fmt.Fprintf(&b, "  metadata=%s", kv(sb.Metadata))
		}
		b.WriteByte('\n')
	}
	return textResult("%s", strings.TrimRight(b.String(), "\n")), nil, nil
}

func (s *server) sandboxKill(ctx context.Context, _ *mcp.CallToolRequest, in sandboxArgs) (*mcp.CallToolResult, any, error) {
	if in.SandboxID == "" {
		return errorResult("sandboxId is required"), nil, nil
	}
	if err := s.c.Sandboxes.Delete(ctx, in.SandboxID); err != nil {
		return clientErrorResult(err), nil, nil
	}
	return textResult("Killed sandbox %s.", in.SandboxID), nil, nil
}

func (s *server) snapshot(ctx context.Context, _ *mcp.CallToolRequest, in snapshotArgs) (*mcp.CallToolResult, any, error) {
	if in.SandboxID == "" {
		return errorResult("sandboxId is required"), nil, nil
	}
	snap, err := s.c.Snapshots.Create(ctx, in.SandboxID, client.NewSnapshot{Name: in.Name})
	if err != nil {
		return clientErrorResult(err), nil, nil
	}
	named := ""
	if snap.Name != "" {
		named = fmt.Sprintf(" (named %s)", snap.Name)
	}
	return textResult("Took snapshot %s%s of sandbox %s.\nsnapshotId: %s", snap.SnapshotID, named, in.SandboxID, snap.SnapshotID), nil, nil
}

func (s *server) rollback(ctx context.Context, _ *mcp.CallToolRequest, in rollbackArgs) (*mcp.CallToolResult, any, error) {
	if in.SandboxID == "" || in.SnapshotID == "" {
		return errorResult("sandboxId and snapshotId are required"), nil, nil
	}
	res, err := s.c.Snapshots.Rollback(ctx, in.SandboxID, client.RollbackRequest{SnapshotID: in.SnapshotID, Force: in.Force})
	if err != nil {
		return clientErrorResult(err), nil, nil
	}
	msg := fmt.Sprintf("Rolled sandbox %s back to snapshot %s.", in.SandboxID, res.SnapshotID)
	if res.ProcessesRestarted {
		msg += " Its processes were restarted: start any background server again."
	}
	return textResult("%s", msg), nil, nil
}

func (s *server) fork(ctx context.Context, _ *mcp.CallToolRequest, in forkArgs) (*mcp.CallToolResult, any, error) {
	if in.SandboxID == "" {
		return errorResult("sandboxId is required"), nil, nil
	}
	res, err := s.c.Snapshots.Fork(ctx, in.SandboxID, client.ForkRequest{SnapshotID: in.SnapshotID, Count: in.Count})
	if err != nil {
		return clientErrorResult(err), nil, nil
	}
	from := "the current state of sandbox " + in.SandboxID
	if in.SnapshotID != "" {
		from = "snapshot " + in.SnapshotID + " of sandbox " + in.SandboxID
	}
	var ok, failed []string
	for _, r := range res {
		switch {
		case r.Sandbox != nil:
			ok = append(ok, r.Sandbox.SandboxID)
		case r.Error != nil:
			failed = append(failed, r.Error.Message)
		}
	}
	var b strings.Builder
	if len(ok) > 0 {
		fmt.Fprintf(&b, "Forked %d sandbox(es) from %s.\nsandboxIds: %s", len(ok), from, strings.Join(ok, ", "))
	}
	for _, e := range failed {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "A fork failed: %s", e)
	}
	r := textResult("%s", b.String())
	r.IsError = len(ok) == 0
	return r, nil, nil
}

func (s *server) diff(ctx context.Context, _ *mcp.CallToolRequest, in diffArgs) (*mcp.CallToolResult, any, error) {
	if in.From == "" {
		return errorResult("from is required: a snapshot id"), nil, nil
	}
	d, err := s.c.Snapshots.Diff(ctx, in.From, in.To, true)
	if err != nil {
		return clientErrorResult(err), nil, nil
	}
	return textResult("%s", diffText(d)), nil, nil
}

// diffText renders a diff: a summary line, then one line per change
// (A added, M modified, D removed) followed by its unified diff if any.
func diffText(d client.Diff) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Changes from %s to %s: %d added, %d modified, %d removed.", d.From, d.To, d.Added, d.Modified, d.Removed)
	for i, c := range d.Changes {
		if b.Len() > maxDiffText {
			fmt.Fprintf(&b, "\n[%d more changes not shown]", len(d.Changes)-i)
			break
		}
		mark := map[string]string{"added": "A", "modified": "M", "removed": "D"}[c.Change]
		if mark == "" {
			mark = "?"
		}
		fmt.Fprintf(&b, "\n%s %s %s", mark, c.Type, c.Path)
		switch {
		case c.Type != "file":
		case c.Change == "modified" && c.OldSize != c.Size:
			fmt.Fprintf(&b, " (%d -> %d bytes)", c.OldSize, c.Size)
		case c.Change == "removed":
			fmt.Fprintf(&b, " (%d bytes)", c.OldSize)
		default:
			fmt.Fprintf(&b, " (%d bytes)", c.Size)
		}
		if c.Diff != "" {
			b.WriteString("\n")
			b.WriteString(strings.TrimRight(c.Diff, "\n"))
		}
	}
	return b.String()
}

func kv(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

func textResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: text(fmt.Sprintf(format, args...))}
}

func errorResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: text(fmt.Sprintf(format, args...)), IsError: true}
}

// clientErrorResult turns a failed API call into a tool error the model can
// act on: the daemon's own message (which names the sandbox, snapshot or
// field at fault), with a hint where the status says more than the message.
func clientErrorResult(err error) *mcp.CallToolResult {
	msg := err.Error()
	switch code := client.StatusCode(err); {
	case errors.Is(err, context.Canceled):
		msg = "cancelled"
	case code == http.StatusUnauthorized:
		msg += " (warren refused the API key this MCP server was given)"
	case code >= 500:
		msg = "warren failed: " + msg
	}
	return errorResult("%s", msg)
}
