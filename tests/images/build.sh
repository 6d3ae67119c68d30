#!/usr/bin/env bash
# Builds both targets of the repository's Containerfile with podman and checks each image.
#
#   tests/images/build.sh [--keep] [WORK_DIR]        (as root; `make images` runs it)
#
# The Containerfile starts FROM docker.io/library/python:<PYTHON>-slim-bookworm. Where no
# registry can be reached, this script makes a stand-in for that image: Debian bookworm
# (debootstrap, minbase) with Python and what the Containerfile calls (`python`, `pip`,
# `python -m venv`), this host's CA bundle and /etc/pip.conf (so pip inside the build trusts
# what this host trusts), imported under the registry's name, so the Containerfile builds
# unchanged. Storage is podman's vfs driver under WORK_DIR (never /var/lib/containers), RUN
# steps use chroot isolation, the checks run in the images with `buildah run`.
#
# Checks: both images run as 10001:10001 (image config and `id`); agent: `python -m
# orchestrator.cli agent --help` works, pyspark is not installed, there is no `java`; analysis:
# `surge analyze --help` works, `java -version` is 17 or later, pyspark imports. Then each
# image's size and each step's seconds. Everything made here is removed at the end, also on
# failure, unless --keep (which keeps WORK_DIR: the base, the logs and the images' storage;
# use them with podman --root WORK_DIR/storage --runroot WORK_DIR/run --storage-driver vfs).
#
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian) for debootstrap.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

keep=0
work=
for arg in "$@"; do
    case $arg in
        --keep) keep=1 ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "build.sh: unknown option $arg (expected --keep, --help or a work directory)" >&2; exit 2 ;;
        *) [ -z "$work" ] || { echo "build.sh: one work directory only, got $work and $arg" >&2; exit 2; }
           work=$arg ;;
    esac
done

missing=()
for tool in podman buildah debootstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "build.sh: ${missing[*]} not found; install with: apt-get install -y --no-install-recommends podman buildah debootstrap (or run: make images)" >&2
    exit 2
fi
[ "$(id -u)" = 0 ] || { echo "build.sh: debootstrap and podman's chroot builds need root; run it as root" >&2; exit 2; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
containerfile=$repo/Containerfile
python=$(sed -n 's/^ARG PYTHON=//p' "$containerfile")
[ -n "$python" ] || { echo "build.sh: $containerfile: no 'ARG PYTHON=<version>' line" >&2; exit 2; }
# shellcheck disable=SC2016  # the Containerfile's own text, not expanded here
grep -qF 'FROM docker.io/library/python:${PYTHON}-slim-bookworm' "$containerfile" || {
    echo "build.sh: $containerfile: expected FROM docker.io/library/python:\${PYTHON}-slim-bookworm, the image this script stands in for" >&2
    exit 2
}
base_name=docker.io/library/python:$python-slim-bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ -n "$work" ]; then
    if [ -e "$work" ] && [ -n "$(ls -A "$work")" ]; then
        echo "build.sh: work directory $work is not empty; give a new or empty one (everything in it is removed at the end)" >&2
        exit 2
    fi
    mkdir -p "$work"
    work=$(cd "$work" && pwd)
else
    work=$(mktemp -d /tmp/surge-images.XXXXXX)
fi
mkdir -p "$work/tmp" "$work/logs"
export TMPDIR=$work/tmp  # podman's and buildah's large temporary files, not /var/tmp
podman=(podman --root "$work/storage" --runroot "$work/run" --storage-driver vfs
        --tmpdir "$work/libpod" --network-config-dir "$work/networks")
buildah=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)

# containers/image keeps a cache of blob digests in /var/lib/containers/cache whatever --root
# says: removed at the end when this run created it.
blob_cache=/var/lib/containers/cache
made_var_lib=0
made_blob_cache=0
[ -e /var/lib/containers ] || made_var_lib=1
[ -e "$blob_cache" ] || made_blob_cache=1

# Anything mounted under the work directory (debootstrap mounts /proc, /sys and /dev/pts in
# the new root while it runs), deepest first.
mounts_under_work() {
    findmnt -rn -o TARGET | awk -v w="$work/" 'index($0, w) == 1' | sort -r
}

# Not `podman system reset`: besides its --root it deletes the user's podman machines.
cleanup() {
    local rc=$? start=$SECONDS target
    set +e
    if [ -d "$work/storage" ]; then
        "${buildah[@]}" rm --all >/dev/null 2>&1
        "${podman[@]}" rm --all --force >/dev/null 2>&1
    fi
    for target in $(mounts_under_work); do umount -l "$target"; done
    [ "$made_blob_cache" = 0 ] || rm -rf "$blob_cache"
    [ "$made_var_lib" = 0 ] || rmdir /var/lib/containers 2>/dev/null
    if [ "$keep" = 1 ]; then
        echo "kept $work; its images: ${podman[*]} images; remove it with: rm -rf $work"
    else
        rm -rf --one-file-system "$work"
        if [ -e "$work" ]; then echo "build.sh: could not remove $work" >&2; rc=1; fi
        echo "cleanup: $((SECONDS - start)) s ($work removed)"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step_names=()
step_seconds=()
# run_step NAME COMMAND...: runs COMMAND with its output in logs/NAME.log and records its
# seconds; on failure shows the log's end and stops.
run_step() {
    local name=$1 log=$work/logs/$1.log start=$SECONDS rc
    shift
    echo "== $name"
    set +e
    (set -e; "$@") >"$log" 2>&1
    rc=$?
    set -e
    if [ "$rc" != 0 ]; then
        tail -n 40 "$log"
        echo "build.sh: step '$name' failed (exit $rc); its whole output: $log (kept with --keep)" >&2
        exit 1
    fi
    step_names+=("$name")
    step_seconds+=($((SECONDS - start)))
    echo "   $name: $((SECONDS - start)) s"
}

make_base() {
    local root=$work/rootfs
    debootstrap --variant=minbase \
        --include=python3,python3-pip,python3-venv,python-is-python3,ca-certificates \
        bookworm "$root" "$mirror"
    local have
    have=$(chroot "$root" python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [ "$have" = "$python" ] || {
        echo "the stand-in's Python is $have, the Containerfile's ARG PYTHON is $python"
        return 1
    }
    [ ! -f /etc/ssl/certs/ca-certificates.crt ] \
        || cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    if [ -f /etc/pip.conf ]; then
        cp /etc/pip.conf "$root/etc/pip.conf"
    else
        printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
    fi
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
}

import_base() {
    # The official image's environment: PATH (the Containerfile's ENV PATH extends it) and LANG.
    tar -C "$work/rootfs" -c . | "${podman[@]}" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$base_name"
}

build_target() {
    "${podman[@]}" build --pull=never --isolation chroot --target "$1" \
        -t "localhost/surge-$1:check" -f "$containerfile" "$repo"
}

failures=0
container=
# in_image COMMAND...: runs COMMAND in the working container of the image being checked, as
# the image's user, with the image's environment and working directory.
in_image() {
    "${buildah[@]}" run --isolation chroot "$container" -- "$@"
}
pass() { echo "   ok    $*"; }
fail() { echo "   FAIL  $*"; failures=$((failures + 1)); }
# expect_ok DESCRIPTION COMMAND...: the command exits 0; shows its first line of output.
expect_ok() {
    local what=$1 out
    shift
    if out=$(in_image "$@" 2>&1); then pass "$what: $(head -n 1 <<<"$out")"
    else fail "$what: exit status not 0: $(tail -n 3 <<<"$out" | tr '\n' ' ')"; fi
}

check_user() {
    local image=$1 config uid gid
    config=$("${podman[@]}" image inspect --format '{{.Config.User}}' "$image")
    case $config in
        10001 | 10001:10001) pass "image config User: $config" ;;
        *) fail "image config User: '$config', expected 10001" ;;
    esac
    uid=$(in_image id -u 2>&1) || uid="(id -u failed: $uid)"
    gid=$(in_image id -g 2>&1) || gid="(id -g failed: $gid)"
    if [ "$uid:$gid" = 10001:10001 ]; then pass "id -u:id -g in the image: $uid:$gid"
    else fail "id -u:id -g in the image: $uid:$gid, expected 10001:10001"; fi
}

check_agent() {
    local out
    expect_ok "python -m orchestrator.cli agent --help" python -m orchestrator.cli agent --help
    if out=$(in_image python -c 'import pyspark' 2>&1); then
        fail "import pyspark works in the agent image (expected no Spark)"
    elif grep -q "No module named 'pyspark'" <<<"$out"; then
        pass "import pyspark fails: $(grep -m 1 "No module named" <<<"$out")"
    else
        fail "import pyspark failed for another reason: $(tail -n 1 <<<"$out")"
    fi
    if out=$(in_image sh -c 'command -v java || ls -d /usr/lib/jvm' 2>/dev/null); then
        fail "a Java runtime is in the agent image: $out"
    else
        pass "no java on PATH, no /usr/lib/jvm"
    fi
}

check_analysis() {
    local out major
    expect_ok "surge analyze --help" surge analyze --help
    out=$(in_image java -version 2>&1 | head -n 1) || true
    major=$(sed -n 's/.*version "\([0-9]*\).*/\1/p' <<<"$out")
    if [ -n "$major" ] && [ "$major" -ge 17 ]; then pass "java -version: $out"
    else fail "java -version: '$out', expected 17 or later"; fi
    expect_ok "import pyspark (version)" python -c 'import pyspark; print(pyspark.__version__)'
}

check_image() {
    local target=$1 image=localhost/surge-$1:check start=$SECONDS
    echo "== check $target"
    container=$("${buildah[@]}" from --pull=never --quiet "$image")
    check_user "$image"
    "check_$target"
    "${buildah[@]}" rm "$container" >/dev/null
    container=
    step_names+=("check $target")
    step_seconds+=($((SECONDS - start)))
    echo "   check $target: $((SECONDS - start)) s"
}

echo "work directory: $work"
run_step base make_base
run_step import import_base
run_step "build agent" build_target agent
run_step "build analysis" build_target analysis
check_image agent
check_image analysis

echo
echo "image sizes (podman image inspect .Size, MB = 10^6 bytes):"
for name in "$base_name" localhost/surge-agent:check localhost/surge-analysis:check; do
    bytes=$("${podman[@]}" image inspect --format '{{.Size}}' "$name")
    printf '  %-45s %6d MB\n' "$name" $(((bytes + 500000) / 1000000))
done
echo "steps (s):"
total=0
for i in "${!step_names[@]}"; do
    printf '  %-45s %6d s\n' "${step_names[$i]}" "${step_seconds[$i]}"
    total=$((total + step_seconds[i]))
done
printf '  %-45s %6d s\n' total "$total"
if [ "$failures" != 0 ]; then
    echo "build.sh: $failures check(s) failed" >&2
    exit 1
fi
echo "all checks passed"
