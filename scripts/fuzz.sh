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

count_files() {
	if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi
}

# deadline_race reports whether a failed run's only complaint is the
# coordinator's "context deadline exceeded", with no failing input.
deadline_race() {
	local fails
	fails=$(grep -c -e '^--- FAIL' -e 'Failing input' -e 'panic:' <<<"$1" || true)
	[ "$fails" = 1 ] && grep -q '^    context deadline exceeded$' <<<"$1"
}
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
		corpus="$mod/$dir/testdata/fuzz/$target"
		before=$(count_files "$corpus")
		if out=$(cd "$mod" && $GO test -tags seccomp -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "./$dir/" 2>&1); then
			tail -3 <<<"$out"
		elif deadline_race "$out" && [ "$(count_files "$corpus")" = "$before" ]; then
			# Go's fuzz coordinator (before go1.27, golang/go#75804) can report
			# its own -fuzztime deadline as a failure. No input failed and none
			# was saved: the target ran its whole time cleanly.
			tail -3 <<<"$out"
			echo "fuzz: $target: the coordinator's end-of-time race (golang/go#75804), no crasher: passed"
		else
			tail -40 <<<"$out"
			failed=1
		fi
	done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v node_modules | sed 's|^\./||' | sort)
exit $failed
