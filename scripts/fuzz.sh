#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for FUZZTIME each (default 20s).
# make test runs it briefly; make fuzz for longer. A crasher is saved under the
# package's testdata/fuzz/ by go test: fix the bug and commit the file as a
# regression seed (plain `go test` then replays it).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-20s}
GO=${GO:-go}
failed=0
# module dir, package dir (relative to the module) and target, for every Fuzz func.
while IFS= read -r file; do
	dir=$(dirname "$file")
	mod=.
	case "$dir" in
	agent/*) mod=agent; dir=${dir#agent/} ;;
	api/*) mod=api; dir=${dir#api/} ;;
	esac
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
		echo "fuzz: $mod/$dir $target for $FUZZTIME"
		# The whole output of a failure (the crasher and what it broke), the
		# last lines of a pass.
		if out=$(cd "$mod" && $GO test -tags seccomp -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "./$dir/" 2>&1); then
			tail -3 <<<"$out"
		else
			tail -40 <<<"$out"
			failed=1
		fi
	done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v node_modules | sed 's|^\./||' | sort)
exit $failed
