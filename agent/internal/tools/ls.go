package tools

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	maxLsDepth   = 10
	maxLsEntries = 1000
)

type lsParams struct {
	Path  string `json:"path"`
	Depth int64  `json:"depth"`
}

func lsTool() *tool {
	return define("ls",
		"List a directory as an indented tree: directories end with /, symlinks show their target (-> target), "+
			"files show their size. Entries are sorted by name; hidden entries are included. depth 1 (the "+
			"default) lists the directory's own entries, higher depths descend. .git directories and symlinked "+
			"directories are listed but not entered. At most 1000 entries are shown. To find files by name "+
			"pattern use glob; to search contents use grep.",
		[]param{
			str("path", "The directory to list: absolute, or relative to the call's directory (by default the user's home). Default: the call's directory."),
			integer("depth", "How many levels to list: 1 is the directory's own entries. Default 1, at most 10.", 1, maxLsDepth),
		},
		runLs)
}

func runLs(ctx context.Context, c *call, p lsParams) Result {
	root, err := c.absOr(p.Path)
	if err != nil {
		return fail("path: %v", err)
	}
	depth := int(max(p.Depth, 1))
	fi, err := os.Stat(root)
	if err != nil {
		return fail("%s", errText("list", root, err))
	}
	if !fi.IsDir() {
		return ok("%s", lsLine(root, root, "", fi))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s/\n", strings.TrimSuffix(root, "/"))
	n, truncated, unreadable := 0, false, 0
	var walk func(dir, indent string, level int) error
	walk = func(dir, indent string, level int) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if dir == root {
				return err
			}
			fmt.Fprintf(&b, "%s[%s]\n", indent, errText("cannot list", dir, err))
			unreadable++
			return nil
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, de := range ents {
			if n >= maxLsEntries || ctx.Err() != nil {
				truncated = true
				return nil
			}
			info, err := de.Info()
			if err != nil {
				continue // removed while listing
			}
			p := filepath.Join(dir, de.Name())
			b.WriteString(lsLine(p, de.Name(), indent, info))
			b.WriteByte('\n')
			n++
			if de.IsDir() && level < depth && de.Name() != ".git" {
				_ = walk(p, indent+"  ", level+1) // only the root's own error is returned
				if truncated {
					return nil
				}
			}
		}
		return nil
	}
	if err := walk(root, "  ", 1); err != nil {
		return fail("%s", errText("list", root, err))
	}
	out := strings.TrimSuffix(b.String(), "\n")
	switch {
	case n == 0 && unreadable == 0:
		out += "\n  (empty directory)"
	case truncated:
		out += fmt.Sprintf("\n[stopped after %d entries: list a subdirectory, lower depth, or use glob to find files]", maxLsEntries)
	}
	return ok("%s", out)
}

// lsLine is one entry: its name, a / for a directory, the target of a
// symlink, the size of a file.
func lsLine(path, name, indent string, fi fs.FileInfo) string {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return indent + name + "/"
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			target = "?"
		}
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			target += "/"
		} else if err != nil {
			target += " (dangling)"
		}
		return indent + name + " -> " + target
	case m.IsRegular():
		exe := ""
		if m.Perm()&0o111 != 0 {
			exe = ", executable"
		}
		return fmt.Sprintf("%s%s  (%s%s)", indent, name, humanSize(fi.Size()), exe)
	default:
		return fmt.Sprintf("%s%s  (%s)", indent, name, m.Type())
	}
}
