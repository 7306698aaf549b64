#!/usr/bin/env bash
# Install the NVIDIA CUDA compiler and disassemblers from PyPI into a Python
# virtual environment, with pinned versions. No GPU and no driver are needed.
#
# Usage:
#   scripts/install-cuda-tools.sh                  # default toolchain (13.5.37)
#   scripts/install-cuda-tools.sh --version 13.2.78
#   FENCELINT_CUDA_VENV=/path/to/venv scripts/install-cuda-tools.sh
#
# The default toolchain goes to $REPO/.cuda-venv; another version goes to
# $REPO/.cuda-venv-<version> so that several ptxas versions can live side by
# side. FENCELINT_CUDA_VENV overrides the venv directory in both cases.
#
# The script is idempotent: when the venv already holds the requested versions
# it installs nothing. Its last line on stdout is the directory holding nvcc,
# ptxas, cuobjdump and nvdisasm; everything else goes to stderr.
set -euo pipefail

DEFAULT_VERSION=13.5.37
# nvidia-cuda-cccl (libcu++ headers) is versioned on its own.
DEFAULT_CCCL_VERSION=13.3.5.0.6

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
}

version="$DEFAULT_VERSION"
while [ $# -gt 0 ]; do
    case "$1" in
        --version) [ $# -ge 2 ] || { usage; exit 2; }; version="$2"; shift 2 ;;
        --version=*) version="${1#--version=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install-cuda-tools: unknown argument: $1" >&2; usage; exit 2 ;;
    esac
done
case "$version" in
    *[!0-9.]*|"") echo "install-cuda-tools: bad version: $version" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${FENCELINT_CUDA_VENV:-}" ]; then
    venv="$FENCELINT_CUDA_VENV"
elif [ "$version" = "$DEFAULT_VERSION" ]; then
    venv="$repo/.cuda-venv"
else
    venv="$repo/.cuda-venv-$version"
fi

if [ "$version" = "$DEFAULT_VERSION" ]; then
    packages=(
        "nvidia-cuda-nvcc==$version"
        "nvidia-cuda-cuobjdump==$version"
        "nvidia-cuda-nvdisasm==$version"
        "nvidia-cuda-crt==$version"
        "nvidia-cuda-runtime==$version"
        "nvidia-nvvm==$version"
        "nvidia-cuda-cccl==$DEFAULT_CCCL_VERSION"
    )
else
    # The wheels of one CUDA release do not all share a patch version (there
    # is no nvidia-cuda-runtime 13.2.78): pin nvcc (which holds ptxas) and
    # nvvm (cicc) exactly, and take the other packages from the same minor
    # release. Without the nvvm pin pip pairs an old nvcc with the newest cicc.
    minor="$(cut -d. -f1,2 <<<"$version")"
    packages=(
        "nvidia-cuda-nvcc==$version"
        "nvidia-nvvm==$version"
        "nvidia-cuda-cuobjdump==$minor.*"
        "nvidia-cuda-nvdisasm==$minor.*"
        "nvidia-cuda-crt==$minor.*"
        "nvidia-cuda-runtime==$minor.*"
        "nvidia-cuda-cccl==$minor.*"
    )
fi

python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    echo "install-cuda-tools: creating venv $venv" >&2
    "$python" -m venv "$venv" >&2
fi

# Skip pip when every pinned package is already at its version.
installed="$("$venv/bin/python" -m pip list --format=freeze 2>/dev/null || true)"
missing=0
for p in "${packages[@]}"; do
    case "$p" in
        *==*.\*) grep -qiF "${p%\*}" <<<"$installed" || missing=1 ;;
        *==*) grep -qixF "$p" <<<"$installed" || missing=1 ;;
        *) grep -qi "^$p==" <<<"$installed" || missing=1 ;;
    esac
done
if [ "$missing" = 1 ]; then
    echo "install-cuda-tools: installing ${packages[*]} into $venv" >&2
    "$venv/bin/python" -m pip install --disable-pip-version-check -q "${packages[@]}" >&2
else
    echo "install-cuda-tools: $venv already holds CUDA $version" >&2
fi

major="${version%%.*}"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
bin="$site/nvidia/cu$major/bin"
for tool in nvcc ptxas cuobjdump nvdisasm; do
    if [ ! -x "$bin/$tool" ]; then
        echo "install-cuda-tools: $tool missing from $bin" >&2
        exit 1
    fi
done
echo "$bin"
