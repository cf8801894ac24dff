// Package earlyinit runs libcontainer's container init as early as Go
// allows: from a package init() that depends on little more than
// libcontainer. Go initialises packages in import-path order once their
// imports are done, so this runs before the heavy initialisers of the rest of
// the warren binary (protobuf, SQLite, the OCI client) — time every sandbox
// start would otherwise pay in its `init` child. Import it for side effects
// from the host binary's main package.
package earlyinit

import "github.com/warrenhq/warren/internal/runtime/native"

func init() { native.Init() }
