package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/warrenhq/warren/client"
)

// A coding agent's loop: a sandbox, tool calls that end with a turn
// snapshot, and a rollback when a step went wrong. It runs against a daemon
// started with `make run` (the admin key is in /var/lib/warren/admin.key).
func Example() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:3000", os.Getenv("WARREN_API_KEY"))

	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "base"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Sandboxes.Delete(ctx, sb.SandboxID)

	params, _ := json.Marshal(map[string]any{"path": "hello.py", "content": "print('hello')\n"})
	res, err := c.Tools.Call(ctx, sb.SandboxID, "write", client.ToolCall{Params: params, Turn: true}, nil)
	if err != nil {
		log.Fatal(err)
	}
	good := res.SnapshotID

	params, _ = json.Marshal(map[string]any{"command": "python3 hello.py && rm hello.py"})
	res, err = c.Tools.Call(ctx, sb.SandboxID, "bash", client.ToolCall{Params: params}, func(out []byte) {
		os.Stdout.Write(out) // bash's output as it comes
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", *res.ExitCode)

	// The file is gone: go back to the snapshot taken after the write.
	if _, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: good}); err != nil {
		log.Fatal(err)
	}
}

// Following a sandbox's log, as `warren logs -f` does.
func ExampleSandboxesService_Logs() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:3000", os.Getenv("WARREN_API_KEY"))
	id := os.Getenv("SANDBOX_ID")
	var cursor int64
	for {
		page, err := c.Sandboxes.Logs(ctx, id, client.LogsQuery{Cursor: cursor, Wait: 30 * time.Second})
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range page.LogEntries {
			fmt.Println(e.Timestamp.Format("15:04:05.000"), e.Fields["source"], e.Message)
		}
		cursor = page.NextCursor
	}
}
