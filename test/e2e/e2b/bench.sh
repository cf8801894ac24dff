#!/usr/bin/env bash
# Runs bench.mjs (the E2B SDK's latency against warren) for `make bench-e2b`.
#
# With E2B_API_URL set, it benchmarks that daemon (set E2B_SANDBOX_URL,
# E2B_API_KEY and E2B_DOMAIN too). Otherwise it starts a throwaway daemon
# from ./bin/warren on a temporary data directory and a free port (building
# the base template from the debootstrap cache in CACHE_DIR takes about a
# minute), and tears it down afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)

if [[ -n "${E2B_API_URL:-}" ]]; then
	export E2B_SANDBOX_URL=${E2B_SANDBOX_URL:-$E2B_API_URL}
	export E2B_DOMAIN=${E2B_DOMAIN:-${WARREN_DOMAIN:-localhost}}
	exec node "$here/bench.mjs"
fi

warren="$root/bin/warren"
[[ -x $warren ]] || { echo "bench-e2b: $warren is missing: run make build" >&2; exit 1; }
cache=${CACHE_DIR:-/var/cache/warren}
data=$(mktemp -d /tmp/warren-bench-e2b.XXXX)
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
addr=127.0.0.1:$port
log=$data.log
pid=""

cleanup() {
	if [[ -n $pid ]]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	"$warren" teardown --yes --data-dir "$data" >/dev/null 2>&1 || echo "bench-e2b: teardown of $data failed" >&2
	rm -rf "$data" "$log"
}
trap cleanup EXIT

mkdir -p "$cache"
echo "bench-e2b: starting a throwaway daemon on $addr (data in $data, log in $log)" >&2
"$warren" serve --data-dir "$data" --cache-dir "$cache" --listen "$addr" --image-size-gb 8 >"$log" 2>&1 &
pid=$!
# serve builds the base template before it listens.
for _ in $(seq 1 600); do
	if curl -fsS "http://$addr/health" >/dev/null 2>&1; then break; fi
	if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; echo "bench-e2b: the daemon exited" >&2; exit 1; fi
	sleep 0.5
done
curl -fsS "http://$addr/health" >/dev/null || { cat "$log" >&2; echo "bench-e2b: the daemon did not come up" >&2; exit 1; }

E2B_API_URL=http://$addr E2B_SANDBOX_URL=http://$addr E2B_API_KEY=$(cat "$data/admin.key") \
	E2B_DOMAIN=${E2B_DOMAIN:-${WARREN_DOMAIN:-localhost}} node "$here/bench.mjs"
