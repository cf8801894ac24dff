package envdfs

const (
	newDirMode  = 0o755
	newFileMode = 0o644
)

// mkdirAll creates dir and its missing parents, mode 0755 and owned by
// uid:gid (as envd does, whoever owns the parent), and returns the
// directories it created, outermost first. On failure it removes them again.
func mkdirAll(dir string, uid, gid int) ([]string, error) {
	return fsErrors.MkdirAll(dir, newDirMode, uid, gid)
}
