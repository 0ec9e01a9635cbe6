#!/usr/bin/env bash
# Builds TinyGo from source against Debian's LLVM 19 and caches it as a
# self-contained TinyGo root in
#
#   ${WASMCCM_CACHE:-$HOME/.cache/wasmccm}/tinygo/<version>/
#     bin/tinygo           the compiler
#     bin/tinygo-wasip1    tinygo with -target=wasip1 added to build, run
#                          and test
#     targets/wasip1.json  Debian's wasi-libc and compiler-rt (below), the
#                          same as targets/wasip1-debian.json; TinyGo's own
#                          is kept as targets/wasip1-upstream.json
#     src/ targets/ lib/   what tinygo reads at run time
#   ${WASMCCM_CACHE:-$HOME/.cache/wasmccm}/bin/tinygo
#                          a link to the compiler, the path the scaffold's
#                          Makefile (wasmccm init) uses when no tinygo is on
#                          PATH, and the one modules/README.md documents
#
# Usage:
#   TINYGO=$(hack/install-tinygo.sh | tail -1)
#   "$TINYGO" build -target=wasip1 -buildmode=c-shared \
#       -scheduler=none -no-debug -o provider.wasm ./path/to/guest
# or, equivalently,
#   ~/.cache/wasmccm/bin/tinygo build -target=wasip1 ...
#   "$(dirname "$TINYGO")/tinygo-wasip1" build -buildmode=c-shared ...
#
# The last line of stdout is the path of bin/tinygo; progress goes to stderr.
# When the cache entry exists the script builds nothing (it still checks the
# Debian packages, which are cheap to check and needed at run time). TinyGo finds
# its root as the parent of the directory holding the binary, so TINYGOROOT
# need not be set; it also needs `go` (1.19 to 1.27) on PATH.
#
# Why from source and why a Debian target: only the Go module proxy and the
# Debian archive are reachable from the machines this project builds on, so
# TinyGo's release tarballs cannot be downloaded. The module zip lacks TinyGo's
# git submodules, so:
#   - the wasip1 target (wasip1-debian too) links Debian's prebuilt wasi-libc and
#     compiler-rt builtins instead of building TinyGo's own copies;
#   - src/net (TinyGo's port of net and net/http, github.com/tinygo-org/net)
#     is missing and the module proxy refuses to serve it. src/net is left
#     empty unless TINYGO_NET_DIR names a copy of that repository; with an
#     empty src/net, guests get Go's own net package but cannot import
#     net/http. encoding/json and the rest of the standard library work.
#
# Environment:
#   TINYGO_VERSION  TinyGo release to build (default v0.42.0).
#   TINYGO_NET_DIR  optional checkout of github.com/tinygo-org/net to install
#                   as src/net, enabling net/http in guests. Also applied to
#                   an existing cache entry, since it needs no rebuild.
#   WASMCCM_CACHE   cache root (default $HOME/.cache/wasmccm).
set -euo pipefail

# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TINYGO_VERSION=${TINYGO_VERSION:-v0.42.0}
TINYGO_NET_DIR=${TINYGO_NET_DIR:-}
LLVM_MAJOR=19

cache_dir="$(wasmccm::cache_root)/tinygo"
root="$cache_dir/$TINYGO_VERSION"

command -v go >/dev/null || wasmccm::die "go is required on PATH"
if [[ -n "$TINYGO_NET_DIR" && ! -f "$TINYGO_NET_DIR/http/request.go" ]]; then
  wasmccm::die "TINYGO_NET_DIR=$TINYGO_NET_DIR does not look like github.com/tinygo-org/net"
fi

# Checked even when the cache is warm: tinygo links libLLVM dynamically and
# runs clang, wasm-ld and wasm-opt, and guests link the wasm32 wasi-libc and
# compiler-rt builtins, so a cache entry alone is not a working compiler.
wasmccm::apt_install "llvm-$LLVM_MAJOR-dev" "libclang-$LLVM_MAJOR-dev" \
  "clang-$LLVM_MAJOR" "lld-$LLVM_MAJOR" "libclang-rt-$LLVM_MAJOR-dev-wasm32" \
  wasi-libc binaryen

# build_compiler SRC builds SRC/bin/tinygo in a writable copy of the module.
build_compiler() {
  local src=$1 mod
  mod=$(wasmccm::module_dir "github.com/tinygo-org/tinygo@$TINYGO_VERSION")
  cp -r "$mod/." "$src"
  chmod -R u+w "$src"
  (
    cd "$src"
    export GOWORK=off GOFLAGS=-mod=mod
    # The espflasher version v0.42.0 pins is not served by the module proxy.
    go mod edit -replace=tinygo.org/x/espflasher=tinygo.org/x/espflasher@v0.7.1
    go mod tidy >&2
    wasmccm::log "building tinygo $TINYGO_VERSION against LLVM $LLVM_MAJOR"
    go build -trimpath -tags "llvm$LLVM_MAJOR" -o bin/tinygo .
  )
}

# net_outdated ROOT succeeds if TINYGO_NET_DIR is set and ROOT/src/net is
# not a copy of it.
net_outdated() {
  [[ -n "$TINYGO_NET_DIR" ]] && ! diff -rq -x .git "$TINYGO_NET_DIR" "$1/src/net" >/dev/null 2>&1
}

# install_net ROOT makes ROOT/src/net a copy of TINYGO_NET_DIR, or an empty
# directory without it, in which case TinyGo uses Go's own net package. The
# copy is staged beside src/net and renamed into place.
install_net() {
  local net=$1/src/net
  if [[ -z "$TINYGO_NET_DIR" ]]; then
    mkdir -p "$net"
    return
  fi
  wasmccm::log "installing $TINYGO_NET_DIR as $net"
  rm -rf "$net.new" "$net.old"
  cp -r "$TINYGO_NET_DIR" "$net.new"
  rm -rf "$net.new/.git"
  chmod -R u+w "$net.new"
  if [[ -d "$net" ]]; then mv "$net" "$net.old"; fi
  mv "$net.new" "$net"
  rm -rf "$net.old"
}

# write_debian_target SRC writes SRC/targets/wasip1-debian.json: wasip1 with
# TinyGo's own libc and compiler-rt (not in the module zip) swapped for
# Debian's wasi-libc and libclang_rt.builtins-wasm32.
write_debian_target() {
  local targets=$1/targets rt edit
  rt="/usr/lib/llvm-$LLVM_MAJOR/lib/clang/$LLVM_MAJOR/lib/wasi/libclang_rt.builtins-wasm32.a"
  [[ -f "$rt" ]] || wasmccm::die "missing $rt (package libclang-rt-$LLVM_MAJOR-dev-wasm32)"
  sed -e 's|"libc":[[:space:]]*"wasi-libc"|"libc": ""|' \
    -e 's|"rtlib":[[:space:]]*"compiler-rt"|"rtlib": ""|' \
    -e 's|"cflags": \[|"cflags": [\n\t\t"-isystem", "/usr/include/wasm32-wasi",|' \
    -e "s|\"ldflags\": \\[|\"ldflags\": [\\n\\t\\t\"-L/usr/lib/wasm32-wasi\", \"-lc\", \"$rt\",|" \
    "$targets/wasip1.json" >"$targets/wasip1-debian.json"
  for edit in '"libc": ""' '"rtlib": ""' '"/usr/include/wasm32-wasi"' 'builtins-wasm32.a"'; do
    grep -qF -- "$edit" "$targets/wasip1-debian.json" ||
      wasmccm::die "targets/wasip1.json changed shape; cannot derive wasip1-debian.json"
  done
}

# make_default_target ROOT makes ROOT/targets/wasip1.json the Debian
# variant, so that -target=wasip1, as the docs and the scaffold write it,
# builds with what this machine has. TinyGo's own is kept as
# wasip1-upstream.json. Also applied to an existing cache entry.
make_default_target() {
  local targets=$1/targets
  if grep -qF '"/usr/include/wasm32-wasi"' "$targets/wasip1.json"; then
    return
  fi
  [[ -f "$targets/wasip1-upstream.json" ]] || cp "$targets/wasip1.json" "$targets/wasip1-upstream.json"
  cp "$targets/wasip1-debian.json" "$targets/wasip1.json.new"
  mv "$targets/wasip1.json.new" "$targets/wasip1.json"
}

# link_bin ROOT points $(cache root)/bin/tinygo at ROOT/bin/tinygo. TinyGo
# finds its root from its executable's real path, so the link works as is.
link_bin() {
  local bin
  bin="$(wasmccm::cache_root)/bin"
  mkdir -p "$bin"
  ln -sfn "$1/bin/tinygo" "$bin/tinygo.new.$$"
  mv -fT "$bin/tinygo.new.$$" "$bin/tinygo"
}

# write_wrapper OUT writes OUT/bin/tinygo-wasip1, which adds the Debian
# target to the subcommands that take one.
write_wrapper() {
  cat >"$1/bin/tinygo-wasip1" <<'EOF'
#!/bin/sh
# tinygo with -target=wasip1-debian (Debian's wasi-libc and compiler-rt).
tinygo="$(dirname "$0")/tinygo"
case "${1:-}" in
build | run | test) cmd=$1; shift; exec "$tinygo" "$cmd" -target=wasip1-debian "$@" ;;
*) exec "$tinygo" "$@" ;;
esac
EOF
  chmod +x "$1/bin/tinygo-wasip1"
}

# assemble SRC OUT copies what tinygo reads at run time into OUT.
assemble() {
  mkdir -p "$2/bin"
  cp "$1/bin/tinygo" "$2/bin/"
  cp -r "$1/src" "$1/targets" "$1/lib" "$1/LICENSE" "$2/"
  write_wrapper "$2"
}

# verify ROOT compiles a reactor shaped like this project's provider
# modules: c-shared, -scheduler=none, //go:wasmexport functions, using
# encoding/json, plus net/http when src/net holds TinyGo's port of it.
verify() {
  local root=$1 dir
  dir=$(mktemp -d)
  printf 'module example.com/reactor\n\ngo 1.22\n' >"$dir/go.mod"
  cat >"$dir/main.go" <<'EOF'
package main

import "encoding/json"

//go:wasmexport add
func add(a, b int32) int32 { return a + b }

//go:wasmexport encode
func encode(n int32) int32 {
	b, err := json.Marshal(map[string]int32{"n": n})
	if err != nil {
		return -1
	}
	return int32(len(b))
}

func main() {}
EOF
  if [[ -f "$root/src/net/http/request.go" ]]; then
    cat >"$dir/http.go" <<'EOF'
package main

import "net/http"

//go:wasmexport request
func request() int32 {
	req, err := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
	if err != nil {
		return -1
	}
	return int32(len(req.Method))
}
EOF
  fi
  wasmccm::log "verifying: building a reactor from $(cd "$dir" && echo *.go)"
  if ! (cd "$dir" && GOWORK=off "$root/bin/tinygo" build -target=wasip1 -buildmode=c-shared \
    -scheduler=none -no-debug -o "$dir/x.wasm" .) >&2; then
    rm -rf "$dir"
    wasmccm::die "$root/bin/tinygo cannot build a wasip1 reactor"
  fi
  wasmccm::log "verified: reactor is $(wc -c <"$dir/x.wasm") bytes"
  rm -rf "$dir"
}

# build_root builds, checks and publishes the cache entry.
build_root() {
  local staging start=$SECONDS
  mkdir -p "$cache_dir"
  staging=$(mktemp -d "$cache_dir/.build-$TINYGO_VERSION.XXXXXX")
  wasmccm::remove_on_exit "$staging"

  build_compiler "$staging/src"
  write_debian_target "$staging/src"
  assemble "$staging/src" "$staging/root"
  make_default_target "$staging/root"
  install_net "$staging/root"
  verify "$staging/root"
  chmod 755 "$staging/root"

  rm -rf "$root" # an incomplete entry, e.g. a file deleted by hand
  wasmccm::publish "$staging/root" "$root"
  wasmccm::log "built in $((SECONDS - start))s into $root"
}

if [[ ! -x "$root/bin/tinygo" || ! -x "$root/bin/tinygo-wasip1" ]]; then
  build_root
else
  if ! grep -qF '"/usr/include/wasm32-wasi"' "$root/targets/wasip1.json"; then
    # An entry made before -target=wasip1 meant the Debian variant.
    make_default_target "$root"
    verify "$root"
  fi
  if net_outdated "$root"; then
    install_net "$root"
    verify "$root"
  fi
fi
link_bin "$root"
echo "$root/bin/tinygo"
