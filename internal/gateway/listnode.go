package gateway

import (
	"bytes"
	"encoding/json"
)

// tagNode names, in each sandbox record of a node's list page, the node
// that listed it ("node"): where the sandbox runs, for the dashboard's
// column and any caller that wants to know. A node's own records carry no
// "node", so the field is not doubled.
func tagNode(page []listed, node string) {
	name, err := json.Marshal(node)
	if err != nil {
		return
	}
	for i, l := range page {
		raw := bytes.TrimSpace(l.raw)
		if len(raw) < 2 || raw[0] != '{' {
			continue
		}
		rest := bytes.TrimSpace(raw[1:])
		out := append([]byte(`{"node":`), name...)
		if rest[0] != '}' {
			out = append(out, ',')
		}
		page[i].raw = append(out, rest...)
	}
}
