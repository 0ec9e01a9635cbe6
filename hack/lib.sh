# shellcheck shell=bash
# Shared helpers for the hack/*.sh scripts: the cache, logging and installs
# of the install scripts, and the dated result files of the benchmarks.
# Source it; do not run it.
#
# Every message goes to stderr so that an installer's stdout carries only the
# path it installed, which callers capture with `| tail -1`.

# WASMCCM_REPO is the repository the sourcing script belongs to, found when
# this file is sourced, before a script changes directory.
WASMCCM_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# wasmccm::cache_root prints the directory under which build products are
# cached. It is outside the work tree so that a fresh clone, `git clean` or a
# second checkout reuses binaries that take minutes to build.
wasmccm::cache_root() {
  echo "${WASMCCM_CACHE:-$HOME/.cache/wasmccm}"
}

# WASMCCM_KUBE_VERSION is the Kubernetes release whose components the
# tests run by default (KUBE_VERSION overrides it): the release of the
# k8s.io/* libraries in go.mod, as test/e2e/cluster.KubeVersion, which a
# test there checks against this line.
WASMCCM_KUBE_VERSION=v1.37.2
# WASMCCM_KUBE_SKEW_VERSION is the older release whose API server the
# end-to-end skew job runs the manager against: one minor behind the
# libraries, the skew the manager supports.
WASMCCM_KUBE_SKEW_VERSION=v1.36.3

# wasmccm::kube_version [VERSION] prints VERSION, else $KUBE_VERSION, else
# WASMCCM_KUBE_VERSION, once it is checked to name a release.
wasmccm::kube_version() {
  local version=${1:-${KUBE_VERSION:-$WASMCCM_KUBE_VERSION}}
  [[ "$version" =~ ^v1\.[0-9]+\.[0-9]+$ ]] ||
    wasmccm::die "a Kubernetes release (KUBE_VERSION, KUBE_SKEW_VERSIONS) must look like $WASMCCM_KUBE_VERSION, got '$version'"
  echo "$version"
}

wasmccm::log() {
  echo "[$(date +%H:%M:%S)] $*" >&2
}

wasmccm::die() {
  echo "error: $*" >&2
  exit 1
}

# wasmccm::module_dir MODULE@VERSION downloads a module through the Go module
# proxy and prints its read-only directory in the module cache. It runs
# outside any module so that the caller's go.mod and go.sum stay untouched.
wasmccm::module_dir() {
  local json dir
  json=$(cd / && GOWORK=off go mod download -json "$1") ||
    wasmccm::die "go mod download $1 failed: $json"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
  [[ -n "$dir" && -d "$dir" ]] || wasmccm::die "no module directory for $1 in: $json"
  echo "$dir"
}

# wasmccm::apt_install PACKAGE... installs only the Debian packages that are
# missing, so a warm machine neither needs the network nor root.
wasmccm::apt_install() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  ((${#missing[@]} == 0)) && return 0
  wasmccm::log "installing Debian packages: ${missing[*]}"
  local sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# wasmccm::publish STAGING FINAL moves a fully built STAGING directory to
# FINAL in one rename, so an interrupted build never leaves a half-filled
# cache entry behind. STAGING must be on the same file system as FINAL.
# If another run published FINAL first, STAGING is discarded.
wasmccm::publish() {
  local staging=$1 final=$2
  if ! mv -T "$staging" "$final" 2>/dev/null; then
    [[ -d "$final" ]] || wasmccm::die "cannot move $staging to $final"
    wasmccm::log "$final was published concurrently; keeping it"
    rm -rf "$staging"
  fi
}

# wasmccm::remove_on_exit DIR removes DIR when the script ends, also when it
# is interrupted (Ctrl-C, kill), so an aborted build leaves no staging
# directory behind. It replaces any EXIT trap.
wasmccm::remove_on_exit() {
  # shellcheck disable=SC2064 # expand DIR now
  trap "rm -rf '$1'" EXIT
  trap 'exit 130' INT TERM HUP
}

# wasmccm::kube_staging_replaces GOMOD VERSION prints a `go mod edit` flag per
# staging module that GOMOD (k8s.io/kubernetes' own go.mod at VERSION) points
# at ./staging. k8s.io/kubernetes requires its staging modules (k8s.io/api,
# client-go, ...) at v0.0.0 and resolves them with replace directives, which
# a dependent module does not inherit; each staging module is published on
# its own as v0.<minor>.<patch>, so the helper module replaces them with that.
wasmccm::kube_staging_replaces() {
  local staging_version="v0.${2#v1.}"
  sed -n 's|^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*$|\1|p' "$1" |
    while read -r mod; do
      echo "-replace=$mod=$mod@$staging_version"
    done
}

# wasmccm::kube_helper_module NAME VERSION PACKAGE@VERSION... makes, in the
# current directory, the throwaway module NAME that Kubernetes components
# are built from: it replaces k8s.io/kubernetes' staging modules at VERSION
# by their published versions and resolves the packages given as
# wasmccm::resolve_shared does. Run it with GOWORK=off GOFLAGS=-mod=mod.
wasmccm::kube_helper_module() {
  local name=$1 version=$2 kube_gomod
  shift 2
  kube_gomod="$(wasmccm::module_dir "k8s.io/kubernetes@$version")/go.mod"
  local -a replaces
  mapfile -t replaces < <(wasmccm::kube_staging_replaces "$kube_gomod" "$version")
  ((${#replaces[@]} > 0)) || wasmccm::die "no staging replace directives in $kube_gomod"
  go mod init "wasmccm.local/$name" 2>get.log
  go mod edit "${replaces[@]}"
  wasmccm::resolve_shared "$@"
}

# wasmccm::helper_module NAME PACKAGE@VERSION... makes, in the current
# directory, the throwaway module NAME that a tool is built from, its
# packages resolved as wasmccm::resolve_shared does. Run it with GOWORK=off
# GOFLAGS=-mod=mod.
wasmccm::helper_module() {
  local name=$1
  shift
  go mod init "wasmccm.local/$name" 2>get.log
  wasmccm::resolve_shared "$@"
}

# wasmccm::resolve_shared PACKAGE@VERSION... requires the packages given in
# the module of the current directory and also requires, at the
# repository's version, each module that provides packages both to them
# and to the repository's tests (the higher version is selected, as
# always). That last step lets one compilation serve both: built as the
# tests are (CGO_ENABLED=0, -trimpath), a package whose version and
# dependencies match has the same build cache key, so the apimachinery,
# client-go and apiserver packages compiled for a tool are not compiled
# again for the tests, nor for the next tool.
wasmccm::resolve_shared() {
  local repo_modules
  local -a repo_versions
  wasmccm::log "fetching modules for $*"
  if ! go get "$@" 2>get.log; then
    cat get.log >&2
    wasmccm::die "could not resolve the modules for $*"
  fi
  # The modules that provide packages, with their versions (a
  # replacement's where one applies); those whose versions differ are
  # required at the repository's. Modules merely listed in a build list
  # are left alone: requiring one loads its own requirements and raises
  # more.
  local modules='{{with .Module}}{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}'
  repo_modules=$(cd "$WASMCCM_REPO" && GOFLAGS= go list -deps -test -f "$modules" ./... | LC_ALL=C sort -u) ||
    wasmccm::die "could not list the repository's modules"
  mapfile -t repo_versions < <(LC_ALL=C join <(go list -deps -f "$modules" "${@%@*}" | LC_ALL=C sort -u) <(echo "$repo_modules") |
    awk '$2 != $3 { print "-require=" $1 "@" $3 }')
  if ((${#repo_versions[@]} > 0)); then
    wasmccm::log "requiring the repository's versions: ${repo_versions[*]#-require=}"
    go mod edit "${repo_versions[@]}"
    go get "$@" 2>get.log || {
      cat get.log >&2
      wasmccm::die "could not resolve $* with the repository's module versions"
    }
  fi
}

# wasmccm::kube_ldflags VERSION prints the linker flags that stamp a
# Kubernetes component built from the module proxy with VERSION, as a
# release build would (`--version`, and the version the kubelet reports).
wasmccm::kube_ldflags() {
  local minor=${1#v1.}
  minor=${minor%%.*}
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$1" \
    "-X k8s.io/component-base/version.gitMajor=1" \
    "-X k8s.io/component-base/version.gitMinor=$minor" \
    "-X k8s.io/component-base/version.gitTreeState=clean"
}

# wasmccm::machine prints the machine a benchmark runs on, for its record:
# cores, CPU model, memory and Go version.
wasmccm::machine() {
  local model kib
  model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  kib=$(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\) kB$/\1/p' /proc/meminfo)
  echo "$(nproc) cores, $model, $((kib / 1024 / 1024)) GiB memory, $(go version)"
}

# wasmccm::load prints the load average (1, 5 and 15 minutes): figures vary
# with the machine's load, so a benchmark records it before and after.
wasmccm::load() {
  cut -d' ' -f1-3 /proc/loadavg
}

# wasmccm::cpu_ticks prints the processors' busy and total time so far, in
# clock ticks, from the first line of /proc/stat (user to steal); nothing
# where there is none.
wasmccm::cpu_ticks() {
  awk '/^cpu / { for (i = 2; i <= 9; i++) total += $i; print total - $5 - $6, total; exit }' /proc/stat 2>/dev/null || true
}

# wasmccm::busy_since TICKS prints the share of processor time, in percent,
# that was busy since TICKS (from wasmccm::cpu_ticks), or "?" when unknown.
# Near 100, a phase waits on the processors, and only less work or more
# processors make it shorter; well below, it waits on something else.
wasmccm::busy_since() {
  awk -v then="$1" -v now="$(wasmccm::cpu_ticks)" 'BEGIN {
    split(then, a, " "); split(now, b, " "); d = b[2] - a[2]
    if (d > 0) printf "%d\n", 100 * (b[1] - a[1]) / d; else print "?" }'
}

# wasmccm::result_path KIND prints the default result file of a benchmark,
# docs/benchmarks/results/<UTC date>-KIND-<revision>.md, which the
# benchmark docs link: a later run, of another revision, gets a file of
# its own rather than replacing the one a note quotes.
wasmccm::result_path() {
  echo "docs/benchmarks/results/$(date -u +%Y-%m-%d)-$1-$(wasmccm::revision).md"
}

# wasmccm::revision prints the work tree's revision, "-dirty" if it has
# changes. A benchmark reads it when it starts: a commit made while it runs
# is not what it measured.
wasmccm::revision() {
  git describe --always --dirty
}

# wasmccm::result_header TITLE COMMAND REVISION LOAD_BEFORE LOAD_AFTER prints
# the head of a result file: the title with the date, then how to produce it
# again and where it was produced (the command, the revision, the machine,
# the load).
wasmccm::result_header() {
  echo "# $1, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Generated by \`$2\` at revision $3."
  echo "Machine: $(wasmccm::machine); load average $4 before, $5 after."
  echo
}
