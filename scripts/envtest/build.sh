#!/usr/bin/env bash
# build.sh builds one control-plane binary of envtest (etcd or kube-apiserver)
# from the Go module proxy, for the tests that run a real API server. Neither
# project publishes a Go-installable binary at these versions (etcd's main
# package sits in its server module; kube-apiserver needs k8s.io/kubernetes
# with every staging module replaced), so each is built through a throwaway
# module made from the go.mod template beside this script, which pins the
# whole build list. The binary is written to a scratch file first and moved
# into place, so an interrupted build leaves nothing that looks finished.
#
#   build.sh etcd|kube-apiserver DEST VERSION
set -euo pipefail

name="$1" dest="$2" version="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
template="$here/$name.go.mod"
go="${GO:-go}"

case "$name" in
etcd)
	pkg=go.etcd.io/etcd/server/v3
	want="go.etcd.io/etcd/server/v3 $version"
	ldflags="-s -w"
	;;
kube-apiserver)
	pkg=k8s.io/kubernetes/cmd/kube-apiserver
	want="k8s.io/kubernetes $version"
	# Without them the binary calls itself v0.0.0-master.
	v=k8s.io/component-base/version
	minor="${version#v1.}"
	minor="${minor%%.*}"
	ldflags="-s -w -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	;;
*)
	echo "build.sh: unknown binary $name (want etcd or kube-apiserver)" >&2
	exit 2
	;;
esac
# The Makefile names the cache directory after the versions: a template
# bumped without it would fill an old directory with a new binary.
if ! grep -q "^[[:space:]]*\(require \)\?$want\b" "$template"; then
	echo "build.sh: $template does not require $want: update the template and the Makefile's version together" >&2
	exit 1
fi

work="$(mktemp -d /tmp/warren-envtest-$name.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cp "$template" "$work/go.mod"
mkdir -p "$(dirname "$dest")"
rm -f "$dest.tmp"
echo "building $name $version into $(dirname "$dest") (once; kube-apiserver takes 15-20 minutes on 2 cores)"
start=$SECONDS
# -mod=mod lets the build record the checksums of the pinned modules in the
# throwaway go.sum (verified against the checksum database as usual).
(cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$go" build -trimpath -ldflags="$ldflags" -o "$dest.tmp" "$pkg")
mv "$dest.tmp" "$dest"
echo "built $dest in $((SECONDS - start)) s"
