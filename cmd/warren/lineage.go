package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/storage/treediff"
)

func lineageCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "lineage ID",
		Short: "Show the family tree of a sandbox: its snapshots, forks, rollbacks and promotes",
		Long: `Show the family a sandbox belongs to as a tree: the template at the root, each
sandbox's snapshots under it in the order they were taken, the sandboxes forked from
a snapshot under that snapshot, and rollbacks and promotes where they happened.
"*" marks the snapshot a sandbox's live tree currently comes from (its head).`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			l, err := a.client().Snapshots.Lineage(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, l)
			}
			_, err = io.WriteString(a.out, lineageTree(l))
			return err
		},
	}
}

// treeNode is one line of a rendered tree and the lines nested under it.
type treeNode struct {
	label    string
	at       time.Time // orders siblings
	seq      int       // breaks ties in at: the order the server gave
	children []*treeNode
}

// lineageTree renders a lineage as text, like tree(1). Everything it needs
// is in l, so it is tested without a server. Nodes that the edges do not
// place (or place in a cycle, which a sane server never sends) are shown at
// the top level rather than dropped.
func lineageTree(l client.Lineage) string {
	x := indexLineage(l)
	template := l.Template
	if template == "" {
		template = "(no template)"
	}
	root := &treeNode{label: template + " (template)"}
	// Roots first: sandboxes not forked from a snapshot in the family, and
	// snapshots whose sandbox is not in it. Then whatever a cycle hid.
	for _, pass := range []func(n client.LineageNode) bool{
		func(n client.LineageNode) bool { return n.Type == "sandbox" && !x.isType(x.origin[n.ID], "snapshot") },
		func(n client.LineageNode) bool { return n.Type == "snapshot" && x.owner[n.ID] == "" },
		func(n client.LineageNode) bool { return n.Type == "sandbox" || n.Type == "snapshot" },
	} {
		for _, n := range l.Nodes {
			if x.done[n.ID] || !pass(n) || x.isTemplate(n, l.Template) {
				continue
			}
			if n.Type == "sandbox" {
				root.children = append(root.children, x.sandbox(n.ID))
			} else {
				root.children = append(root.children, x.snapshot(n.ID, ""))
			}
		}
	}
	sortTree(root.children)

	var b strings.Builder
	b.WriteString(root.label + "\n")
	renderTree(&b, root, "")
	return b.String()
}

// lineageIndex is a lineage's nodes and edges looked up by id, and the
// nodes already placed in the tree being built.
type lineageIndex struct {
	nodes    map[string]client.LineageNode
	seq      map[string]int         // the order the server gave
	owner    map[string]string      // snapshot → its sandbox
	origin   map[string]string      // sandbox → the snapshot it was forked or created from
	ownSnaps map[string][]string    // sandbox → its snapshots
	forks    map[string][]string    // snapshot → sandboxes started from it
	events   map[string][]*treeNode // sandbox → its rollbacks and promotes
	snapAt   map[string]time.Time   // snapshot → when its snapshot-of edge says it was taken
	done     map[string]bool        // placed in the tree
}

// indexLineage indexes l's nodes and the edges between them of the types
// each edge kind joins.
func indexLineage(l client.Lineage) *lineageIndex {
	x := &lineageIndex{
		nodes: map[string]client.LineageNode{}, seq: map[string]int{},
		owner: map[string]string{}, origin: map[string]string{},
		ownSnaps: map[string][]string{}, forks: map[string][]string{},
		events: map[string][]*treeNode{}, snapAt: map[string]time.Time{}, done: map[string]bool{},
	}
	for i, n := range l.Nodes {
		x.nodes[n.ID] = n
		x.seq[n.ID] = i
	}
	for i, e := range l.Edges {
		evSeq := len(l.Nodes) + i // events sort after nodes taken at the same instant
		switch e.Kind {
		case "snapshot-of":
			if x.isType(e.From, "snapshot") && x.isType(e.To, "sandbox") {
				x.owner[e.From] = e.To
				x.snapAt[e.From] = e.At
			}
		case "forked-from", "created-from":
			if x.isType(e.From, "sandbox") && x.isType(e.To, "snapshot") && x.origin[e.From] == "" {
				x.origin[e.From] = e.To
			}
		case "rolled-back-to":
			x.events[e.From] = append(x.events[e.From], &treeNode{label: "↺ rolled back to " + e.To, at: e.At, seq: evSeq})
		case "promoted-from":
			x.events[e.From] = append(x.events[e.From], &treeNode{label: "⇐ promoted from " + e.To, at: e.At, seq: evSeq})
		}
	}
	for _, n := range l.Nodes {
		if n.Type == "snapshot" && x.owner[n.ID] != "" {
			x.ownSnaps[x.owner[n.ID]] = append(x.ownSnaps[x.owner[n.ID]], n.ID)
		}
	}
	for _, n := range l.Nodes {
		if n.Type == "sandbox" && x.origin[n.ID] != "" {
			x.forks[x.origin[n.ID]] = append(x.forks[x.origin[n.ID]], n.ID)
		}
	}
	return x
}

func (x *lineageIndex) isType(id, typ string) bool {
	n, ok := x.nodes[id]
	return ok && n.Type == typ
}

// isTemplate: n is the template, the root already (older servers named it
// as a destroyed sandbox).
func (x *lineageIndex) isTemplate(n client.LineageNode, template string) bool {
	return n.Type == "template" || (n.ID == template && n.Type == "sandbox" && len(x.ownSnaps[n.ID]) == 0 && len(x.events[n.ID]) == 0)
}

// snapshot places snapshot id and the sandboxes forked from it; headOf is
// the sandbox whose snapshots it is listed among, if any.
func (x *lineageIndex) snapshot(id, headOf string) *treeNode {
	x.done[id] = true
	n := x.nodes[id]
	at := n.CreatedAt
	if at.IsZero() {
		at = x.snapAt[id]
	}
	t := &treeNode{label: snapshotLabel(n, x.nodes[headOf].Head == id && headOf != ""), at: at, seq: x.seq[id]}
	for _, sb := range x.forks[id] {
		if !x.done[sb] {
			t.children = append(t.children, x.sandbox(sb))
		}
	}
	sortTree(t.children)
	return t
}

// sandbox places sandbox id, its snapshots and its events.
func (x *lineageIndex) sandbox(id string) *treeNode {
	x.done[id] = true
	n := x.nodes[id]
	state := n.State
	if state == "" {
		state = "unknown"
	}
	// A head among the sandbox's own snapshots gets its "*"; a fork's
	// head is where it hangs; any other is named on the sandbox's line.
	label := id + " (sandbox, " + state
	own := false
	for _, s := range x.ownSnaps[id] {
		own = own || s == n.Head
	}
	if n.Head != "" && !own && n.Head != x.origin[id] {
		label += ", head " + n.Head
	}
	label += ")"
	t := &treeNode{label: label, at: n.CreatedAt, seq: x.seq[id]}
	for _, s := range x.ownSnaps[id] {
		if !x.done[s] {
			t.children = append(t.children, x.snapshot(s, id))
		}
	}
	t.children = append(t.children, x.events[id]...)
	sortTree(t.children)
	return t
}

// snapshotLabel is "ID NAME", with "* " in front of a head and
// " (deleted)" after a tombstone.
func snapshotLabel(n client.LineageNode, head bool) string {
	label := n.ID + " " + snapshotName(n.Name, n.Kind, n.Turn)
	if head {
		label = "* " + label
	}
	if n.State == "deleted" {
		label += " (deleted)"
	}
	return label
}

func sortTree(ts []*treeNode) {
	sort.SliceStable(ts, func(i, j int) bool {
		if !ts[i].at.Equal(ts[j].at) {
			return ts[i].at.Before(ts[j].at)
		}
		return ts[i].seq < ts[j].seq
	})
}

func renderTree(b *strings.Builder, t *treeNode, prefix string) {
	for i, c := range t.children {
		branch, indent := "├── ", "│   "
		if i == len(t.children)-1 {
			branch, indent = "└── ", "    "
		}
		b.WriteString(prefix + branch + c.label + "\n")
		renderTree(b, c, prefix+indent)
	}
}

func diffCmd(a *app) *cobra.Command {
	var content bool
	cmd := &cobra.Command{
		Use:   "diff SNAP [SNAP2|live]",
		Short: "List the files that differ between a snapshot and another one or the live tree",
		Long: `List the files added (A), modified (M) and removed (D) between snapshot SNAP and
SNAP2, or the live tree of SNAP's sandbox ("live", the default). With --content,
small text files are followed by a unified diff.`,
		Example: `  warren diff $SNAP
  warren diff --content $SNAP1 $SNAP2`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			from, err := a.snapshotRef(cmd.Context(), argv[0], "")
			if err != nil {
				return err
			}
			to := "live"
			if len(argv) == 2 {
				to = argv[1]
			}
			if to != "live" && !strings.HasPrefix(to, "live:") {
				if to, err = a.snapshotRef(cmd.Context(), to, ""); err != nil {
					return err
				}
			}
			d, err := a.client().Snapshots.Diff(cmd.Context(), from, to, content)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, d)
			}
			_, err = io.WriteString(a.out, formatDiff(d, content))
			return err
		},
	}
	cmd.Flags().BoolVar(&content, "content", false, "show a unified diff of each changed small text file")
	return cmd
}

// formatDiff renders a diff as one line per changed path and a summary.
func formatDiff(d client.Diff, content bool) string {
	var b strings.Builder
	for _, e := range d.Changes {
		b.WriteString(diffLine(e) + "\n")
		if content && e.Diff != "" {
			b.WriteString(e.Diff)
			if !strings.HasSuffix(e.Diff, "\n") {
				b.WriteString("\n")
			}
		}
	}
	took := time.Duration(d.TookMs * float64(time.Millisecond)).Round(time.Microsecond * 100)
	fmt.Fprintf(&b, "%d added, %d modified, %d removed (%s → %s in %s)\n", d.Added, d.Modified, d.Removed, d.From, d.To, took)
	return b.String()
}

// diffLine is "A  /path (1.2KiB)", "M  /path (10B → 12B, mode 0644 → 0755)",
// "D  /path"; directories end in "/".
func diffLine(e client.DiffEntry) string {
	code := map[string]string{"added": "A", "modified": "M", "removed": "D"}[e.Change]
	if code == "" {
		code = "?"
	}
	path := e.Path
	if e.Type == "dir" && !strings.HasSuffix(path, "/") {
		path += "/"
	}
	path = treediff.DisplayPath(path)
	var details []string
	if e.Type != "" && e.Type != "file" && e.Type != "dir" {
		details = append(details, e.Type)
	}
	switch e.Change {
	case "added":
		if e.Type == "file" || e.Type == "" {
			details = append(details, fmtBytes(e.Size))
		}
	case "modified":
		isFile := e.Type == "file" || e.Type == ""
		if isFile && e.Size != e.OldSize {
			details = append(details, fmtBytes(e.OldSize)+" → "+fmtBytes(e.Size))
		}
		if e.Mode&0o7777 != e.OldMode&0o7777 && e.Mode != 0 && e.OldMode != 0 {
			details = append(details, fmt.Sprintf("mode %04o → %04o", e.OldMode&0o7777, e.Mode&0o7777))
		}
		if isFile && len(details) == 0 {
			details = append(details, fmtBytes(e.Size))
		}
	}
	line := code + "  " + path
	if len(details) > 0 {
		line += " (" + strings.Join(details, ", ") + ")"
	}
	return line
}
