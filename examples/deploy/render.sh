#!/bin/sh
# Renders the ConfigMap wasm-provider-module from a provider module file.
#
#   render.sh MODULE [TEMPLATE] > module.yaml
#   render.sh MODULE | kubectl apply --server-side -f -
#
# MODULE is a gzip-compressed module (.wasm.gz) or a plain .wasm file, which
# is compressed with gzip -9n first. TEMPLATE defaults to module-configmap.yaml
# beside this script; the line holding the placeholder is completed with the
# base64 of the compressed module, every other line is copied unchanged.
#
# Fails when the compressed module exceeds the 1 MiB a ConfigMap can hold.
# Prints the sha256 of the compressed module to stderr, the value that
# module.sha256 of the cloud-config pins.
set -eu

placeholder=__SIMCLOUD_WASM_GZ_BASE64__
# Kubernetes' limit on the total size of a ConfigMap's data and binaryData.
max_bytes=1048576

die() {
	echo "render.sh: $*" >&2
	exit 1
}

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	die "usage: render.sh MODULE [TEMPLATE]"
fi
module=$1
template=${2:-$(dirname "$0")/module-configmap.yaml}
[ -f "$module" ] || die "$module: no such file"
[ -f "$template" ] || die "$template: no such file"

count=$(grep -c "$placeholder" "$template" || true)
[ "$count" = 1 ] || die "$template: want exactly one line with $placeholder, found $count"

tmp=
trap '[ -z "$tmp" ] || rm -f "$tmp"' EXIT

magic=$(head -c 4 "$module" | od -An -tx1 | tr -d ' \n')
case $magic in
1f8b*)
	gz=$module
	;;
0061736d)
	tmp=$(mktemp)
	gzip -9nc "$module" >"$tmp"
	gz=$tmp
	;;
*)
	die "$module is neither a wasm module nor gzip-compressed"
	;;
esac

size=$(wc -c <"$gz" | tr -d ' ')
if [ "$size" -gt "$max_bytes" ]; then
	die "the compressed module is $size bytes; a ConfigMap holds at most $max_bytes.
Build it with TinyGo, or deliver it in an image volume or by an init container (README.md)."
fi

if command -v sha256sum >/dev/null 2>&1; then
	echo "sha256 of the compressed module ($size bytes): $(sha256sum <"$gz" | cut -d' ' -f1)" >&2
elif command -v shasum >/dev/null 2>&1; then
	echo "sha256 of the compressed module ($size bytes): $(shasum -a 256 <"$gz" | cut -d' ' -f1)" >&2
fi

line=$(grep -n "$placeholder" "$template" | cut -d: -f1)
head -n "$((line - 1))" "$template"
sed -n "${line}p" "$template" | sed "s/$placeholder.*//" | tr -d '\n'
base64 <"$gz" | tr -d '\n'
echo
tail -n "+$((line + 1))" "$template"
