#!/usr/bin/env bash
# gen-k8s.sh regenerates what controller-gen makes of warren's Kubernetes API
# (apis/): the deepcopy functions beside the types and the CRDs in
# deploy/crds. Both are committed; run it (make generate) after editing a
# type or a marker. CONTROLLER_GEN names the binary (the Makefile builds a
# pinned one: the output depends on its version).
#
#   gen-k8s.sh          writes into the repository
#   gen-k8s.sh DIR      writes the same tree under DIR instead (the test that
#                       compares the committed output with a fresh one)
set -euo pipefail

gen="${CONTROLLER_GEN:?CONTROLLER_GEN is not set: run make generate-k8s, which builds controller-gen}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root}"
pkg=apis/warren/v1alpha1

cd "$root"
mkdir -p "$out/$pkg" "$out/deploy/crds"
# A CRD whose type was removed must not stay behind.
rm -f "$out"/deploy/crds/warren.dev_*.yaml
"$gen" object paths="./$pkg" output:object:dir="$out/$pkg" \
	crd paths="./$pkg" output:crd:dir="$out/deploy/crds"
