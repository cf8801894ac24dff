#!/usr/bin/env bash
# gen-proto.sh regenerates the Go and connect-go code for the agent protocol
# from api/proto into api/gen. The generated code is committed; run this after
# editing a .proto file. It needs protoc (apt: protobuf-compiler) and installs
# the two Go plugins at pinned versions into a cache directory so every run
# produces the same output.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12          # google.golang.org/protobuf, as in go.mod
PROTOC_GEN_CONNECT_GO_VERSION=v1.21.1   # connectrpc.com/connect, as in go.mod

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bindir="${WARREN_TOOLS_BIN:-$(go env GOPATH)/warren-tools/protoc-plugins}"

if ! command -v protoc >/dev/null 2>&1; then
	echo "gen-proto: protoc not found; install it with: apt-get install -y protobuf-compiler" >&2
	exit 1
fi

# install_plugin installs a plugin once per version: the version is recorded in
# a stamp file beside the binary, so a version bump above re-installs it.
install_plugin() {
	local name="$1" pkg="$2" version="$3"
	local stamp="$bindir/.$name.version"
	if [[ -x "$bindir/$name" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
		return
	fi
	mkdir -p "$bindir"
	GOBIN="$bindir" GOFLAGS=-mod=mod go install "$pkg@$version"
	echo "$version" >"$stamp"
}

install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_plugin protoc-gen-connect-go connectrpc.com/connect/cmd/protoc-gen-connect-go "$PROTOC_GEN_CONNECT_GO_VERSION"

out="$root/api/gen"
rm -rf "$out/warren" "$out/process" "$out/filesystem"
mkdir -p "$out"

cd "$root/api/proto"
PATH="$bindir:$PATH" protoc \
	--proto_path=. \
	--plugin=protoc-gen-go="$bindir/protoc-gen-go" \
	--plugin=protoc-gen-connect-go="$bindir/protoc-gen-connect-go" \
	--go_out="$out" --go_opt=paths=source_relative \
	--connect-go_out="$out" --connect-go_opt=paths=source_relative \
	warren/agent/v1/process.proto warren/agent/v1/files.proto warren/agent/v1/tunnel.proto warren/agent/v1/tools.proto \
	process/process.proto filesystem/filesystem.proto

echo "gen-proto: generated $(find "$out" -name '*.go' | wc -l) files under api/gen"
