package tools

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/warrenhq/warren/agent/internal/fsops"
)

type writeParams struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func writeTool() *tool {
	return define("write",
		"Write a file: create it, or replace all of its content. Missing parent directories are created. "+
			"A replaced file keeps its mode and owner; a new file gets mode 0644 and belongs to the acting user. "+
			"The content is written exactly as given (no newline is added at the end). The file is replaced "+
			"atomically: a reader sees the old or the new content, never a mix. To change part of an existing "+
			"file prefer edit or apply_patch, which do not need the whole content.",
		[]param{
			str("path", "The file to write: absolute, or relative to the call's directory (by default the user's home). A symlink is written through.").req(),
			str("content", "The complete new content of the file.").reqMayBeEmpty(),
		},
		runWrite)
}

func runWrite(ctx context.Context, c *call, p writeParams) Result {
	path, err := c.abs(p.Path)
	if err != nil {
		return fail("path: %v", err)
	}
	target := resolveLink(path)
	mode := fs.FileMode(newFileMode)
	uid, gid := c.owner()
	existed := false
	switch fi, err := os.Stat(target); {
	case err == nil && fi.IsDir():
		return fail("%s is a directory; give the path of a file inside it", path)
	case err == nil && !fi.Mode().IsRegular():
		return fail("%s exists and is not a regular file (%s); write replaces regular files only", path, fi.Mode().Type())
	case err == nil:
		existed = true
		mode = keptMode(fi)
		uid, gid = ownerOf(fi)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fail("%s", errText("write", path, err))
	}
	created, err := mkdirParents(target, int(c.user.UID), int(c.user.GID))
	if err != nil {
		return fail("%s", errText("write", path, err))
	}
	if err := replace(target, []byte(p.Content), mode, uid, gid, existed); err != nil {
		fsops.RemoveDirs(created)
		return fail("%s", errText("write", path, err))
	}
	lines := strings.Count(p.Content, "\n")
	if p.Content != "" && !strings.HasSuffix(p.Content, "\n") {
		lines++
	}
	what := "created"
	if existed {
		what = "replaced"
	}
	if len(created) > 0 {
		what += ", with " + plural(len(created), "new parent directory", "new parent directories")
	}
	return ok("Wrote %s (%s) to %s (%s)", plural(len(p.Content), "byte", "bytes"), plural(lines, "line", "lines"), path, what)
}
