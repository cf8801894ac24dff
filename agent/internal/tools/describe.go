package tools

import (
	"encoding/json"
	"sort"
)

// Description is a tool as GET /tools shows it.
type Description struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Params      json.RawMessage `json:"params"`
}

// Describe lists every tool, sorted by name. The daemon learns the
// catalogue from it (`warren-agent -tools`) so that it can serve GET /tools
// without a sandbox, from the very binary its sandboxes run.
func Describe() []Description {
	var out []Description
	for _, t := range catalogue() {
		out = append(out, Description{Name: t.name, Description: t.description, Params: t.schema})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
