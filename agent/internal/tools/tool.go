package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Result is a tool's answer. A failure that is the model's doing (a missing
// file, an ambiguous edit, a command exiting non-zero) is a Result with
// IsError set and a Content that says what to do, never a Go error.
type Result struct {
	Content  string
	IsError  bool
	ExitCode *int // bash only
	Duration time.Duration
}

func ok(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...)}
}

func fail(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// tool is one entry of the catalogue.
type tool struct {
	name        string
	description string
	params      []param
	schema      json.RawMessage
	// run decodes the checked params into the tool's own struct and runs it.
	run func(ctx context.Context, c *call, params []byte) (Result, error)
	// decode only decodes them, so a test can see that every param in the
	// schema has its field in the struct.
	decode func(params []byte) error
}

// define ties a tool's params struct P to its parameter list: run gets P
// decoded strictly from params that already passed check.
func define[P any](name, description string, params []param, run func(context.Context, *call, P) Result) *tool {
	return &tool{
		name:        name,
		description: description,
		params:      params,
		schema:      schema(params),
		run: func(ctx context.Context, c *call, raw []byte) (Result, error) {
			var p P
			if err := decodeStrict(raw, &p); err != nil {
				return Result{}, fmt.Errorf("tool %s: %w", name, err)
			}
			return run(ctx, c, p), nil
		},
		decode: func(raw []byte) error {
			var p P
			return decodeStrict(raw, &p)
		},
	}
}

// catalogue lists every tool; the service indexes it by name.
func catalogue() []*tool {
	return []*tool{
		bashTool(),
		readTool(),
		writeTool(),
		editTool(),
		lsTool(),
		globTool(),
		grepTool(),
		applyPatchTool(),
	}
}
