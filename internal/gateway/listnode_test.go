package gateway

import (
	"encoding/json"
	"testing"
)

func TestTagNode(t *testing.T) {
	page := []listed{{raw: json.RawMessage(`{"sandboxID":"a","state":"running"}`)}, {raw: json.RawMessage(` {} `)}, {raw: json.RawMessage(`[]`)}}
	tagNode(page, `node-"1"`)
	for i, want := range []string{`{"node":"node-\"1\"","sandboxID":"a","state":"running"}`, `{"node":"node-\"1\""}`, `[]`} {
		if string(page[i].raw) != want {
			t.Errorf("record %d: %s, want %s", i, page[i].raw, want)
		}
		if i < 2 {
			var m map[string]any
			if err := json.Unmarshal(page[i].raw, &m); err != nil || m["node"] != `node-"1"` {
				t.Errorf("record %d: %s does not decode with its node: %v", i, page[i].raw, err)
			}
		}
	}
}
