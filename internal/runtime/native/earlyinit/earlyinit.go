// Package earlyinit runs libcontainer's container init as early as Go
// allows: from a package init() that depends on little more than
// libcontainer, so that the `init` child of every sandbox start skips the
// initialisers that run after it. Import it for side effects from the host
// binary's main package.
//
// Go initialises, at each step, the first package in import-path order
// whose imports are done. libcontainer imports net, which needs
// vendor/golang.org/x/net/dns/dnsmessage, and "vendor/" sorts after every
// other path. So what does not import net (SQLite, the MCP SDK, ...) is
// initialised before this runs, and so is what does and sorts before it
// (nftables, netlink): ~180 packages, 2–3 ms of each start (see
// docs/design.md, "Sandbox start").
package earlyinit

import "github.com/warrenhq/warren/internal/runtime/native"

func init() { native.Init() }
