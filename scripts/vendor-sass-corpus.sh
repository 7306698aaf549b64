#!/usr/bin/env bash
# Real-world SASS coverage: disassembles vendor cubins with nvdisasm and lints the text with
# fencelint, keeping only summaries (the text of the whole of NCCL is many GB).
#
# Usage:
#   scripts/vendor-sass-corpus.sh [options]
#     --nccl-arch LIST   NCCL architectures to run, comma-separated (`sm_90,sm_100`) or `all`
#                        (default: all)
#     --skip-nccl        do not run NCCL
#     --skip-flashinfer  do not run flashinfer
#     --nvshmem          also run NVSHMEM (not run by default)
#     --all              lint every cubin of the flashinfer-cubin wheel instead of the sample
#     --sample N         flashinfer sample size target (default 1000; see `sample` below)
#     --jobs N           disassemblies at a time (default 2)
#     --report-only      only aggregate the summaries already in .corpus/*/sass/
#
# Environment: FENCELINT (the fencelint binary; default target-audit/release/fencelint, built
# with `cargo build --release -p fencelint-cli` when missing), FENCELINT_CUDA_BIN (the folder
# holding nvdisasm and cuobjdump; default the pip CUDA tools of /work/cuda-venv, then PATH).
#
# Corpora (everything under .corpus/, which is gitignored):
#   nccl        .corpus/nccl/libnccl.so.2 (scripts/vendor-ptx-corpus.sh fetches it); every cubin
#               extracted with `cuobjdump -xelf all` into .corpus/nccl/cubins/.
#   flashinfer  `pip download --no-deps flashinfer-cubin` into .corpus/wheels/; a fixed,
#               stratified sample of its cubins extracted into .corpus/flashinfer/cubins/.
#   nvshmem     `pip download --no-deps nvidia-nvshmem-cu13` into .corpus/wheels/; every cubin
#               of its libnvshmem_host.so.3 and of the objects of its libnvshmem_device.a,
#               extracted with `cuobjdump -xelf all` into .corpus/nvshmem/cubins/.
#
# Per cubin: `nvdisasm -c -g CUBIN` (falling back to `cuobjdump -sass CUBIN` when nvdisasm
# fails) is streamed through a small counter (functions, instructions, opcodes) straight into
# `fencelint check --select all --format json /dev/stdin`; nothing of the text is stored. Kept
# in .corpus/<corpus>/sass/: NAME.stats.json (counts, opcodes, tool exit codes, stderr) and
# NAME.jsonl (the diagnostics). A cubin whose summary exists is skipped on a re-run.
#
# The report (stdout and .corpus/<corpus>/sass-report.{txt,json}) gives per corpus: cubins,
# functions, instructions, parse errors (each file with its messages), unknown opcodes (opcodes
# that crates/fencelint-lower/src/sass_semantics.tsv classifies as `other`, counted by opcode
# base) and findings per rule.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
corpus="$repo/.corpus"
tsv="$repo/crates/fencelint-lower/src/sass_semantics.tsv"
python="${PYTHON:-python3}"

nccl_arch="all"
run_nccl=1
run_fi=1
run_nvshmem=0
fi_all=0
sample=1000
jobs=2
report_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --nccl-arch) nccl_arch="$2"; shift ;;
        --skip-nccl) run_nccl=0 ;;
        --skip-flashinfer) run_fi=0 ;;
        --nvshmem) run_nvshmem=1 ;;
        --all) fi_all=1 ;;
        --sample) sample="$2"; shift ;;
        --jobs) jobs="$2"; shift ;;
        --report-only) report_only=1 ;;
        -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
        *) echo "vendor-sass-corpus: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

log() { echo "vendor-sass-corpus: $*" >&2; }

find_cuda_bin() {
    local venv=/work/cuda-venv/lib/python3.11/site-packages/nvidia/cu13/bin
    if [ -n "${FENCELINT_CUDA_BIN:-}" ] && [ -x "$FENCELINT_CUDA_BIN/nvdisasm" ]; then
        echo "$FENCELINT_CUDA_BIN"
    elif [ -x "$venv/nvdisasm" ]; then
        echo "$venv"
    elif command -v nvdisasm > /dev/null 2>&1; then
        dirname "$(command -v nvdisasm)"
    else
        "$repo/scripts/install-cuda-tools.sh" | tail -n 1
    fi
}

helper="$(mktemp -d)/sasscov.py"
trap 'rm -rf "$(dirname "$helper")"' EXIT
cat > "$helper" <<'PY'
"""Helpers of vendor-sass-corpus.sh: stream counter, sampler, report."""
import collections, json, os, re, struct, sys, zipfile

INST = re.compile(rb"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
FUNC = re.compile(rb"^\s*\.type\s+\S+,\s*@function", re.M)


def count(out_path):
    """Copy stdin to stdout, counting functions, instructions and full opcodes."""
    inp, outp = sys.stdin.buffer, sys.stdout.buffer
    ops = collections.Counter()
    funcs = 0
    nbytes = 0
    lines = 0
    rest = b""
    while True:
        chunk = inp.read(1 << 22)
        if not chunk:
            break
        outp.write(chunk)
        nbytes += len(chunk)
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        body, rest = data[:cut], data[cut:]
        lines += body.count(b"\n")
        ops.update(INST.findall(body))
        funcs += len(FUNC.findall(body))
    if rest:
        lines += 1
        ops.update(INST.findall(rest))
        funcs += len(FUNC.findall(rest))
    outp.flush()
    with open(out_path, "w") as f:
        json.dump({"bytes": nbytes, "lines": lines, "functions": funcs,
                   "instructions": sum(ops.values()),
                   "opcodes": {k.decode(): v for k, v in sorted(ops.items())}}, f)


def elf_arch(head):
    flags = struct.unpack_from("<I", head, 48)[0]
    sm = (flags >> 8) & 0xFF if head[7] == 0x41 else flags & 0xFF
    return "sm_%d" % sm


def sample(wheel, target, outdir, listfile, take_all):
    """A fixed, stratified sample: strata are (kernel-family folder, architecture); names are
    sorted and every k-th is taken, so the sample is the same on every run (no randomness)."""
    z = zipfile.ZipFile(wheel)
    names = sorted(i.filename for i in z.infolist() if i.filename.endswith(".cubin"))
    strata = collections.defaultdict(list)
    for n in names:
        parts = n.split("/")
        family = parts[3]  # flashinfer_cubin/cubins/<hash>/<family>/...
        with z.open(n) as f:
            arch = elf_arch(f.read(64))
        strata[(family, arch)].append(n)
    total = len(names)
    chosen = []
    for key in sorted(strata):
        members = strata[key]
        if take_all:
            k = len(members)
        else:
            k = min(len(members), max(25, round(len(members) * target / total)))
        picked = [members[(i * len(members)) // k] for i in range(k)]
        chosen += picked
        print("flashinfer stratum %-32s %-7s %5d cubins, %4d sampled" % (key[0], key[1], len(members), k), file=sys.stderr)
    os.makedirs(outdir, exist_ok=True)
    with open(listfile, "w") as lf:
        for n in chosen:
            parts = n.split("/")
            flat = parts[3].replace("/", "_") + "__" + parts[-1]
            dest = os.path.join(outdir, flat)
            if not os.path.exists(dest):
                with z.open(n) as src, open(dest + ".tmp", "wb") as dst:
                    dst.write(src.read())
                os.replace(dest + ".tmp", dest)
            lf.write(dest + "\n")
    print("flashinfer: %d of %d cubins selected" % (len(chosen), total), file=sys.stderr)


def load_table(tsv):
    rows = []
    for line in open(tsv):
        if line.startswith("#") or not line.strip():
            continue
        cols = line.rstrip("\n").split("\t")
        if cols[0].startswith("."):
            continue
        parts = cols[0].split(".")
        rows.append((parts[0], parts[1:], cols[1]))
    return rows


def classify(opcode, rows, cache):
    """The class of the most specific row whose base matches and whose modifiers are all
    present in order; `other` when none matches."""
    if opcode in cache:
        return cache[opcode]
    parts = opcode.split(".")
    best, best_n = "other", -1
    for base, mods, cls in rows:
        if base != parts[0]:
            continue
        it = iter(parts[1:])
        if all(any(m == p for p in it) for m in mods) and len(mods) > best_n:
            best, best_n = cls, len(mods)
    cache[opcode] = best
    return best


def report(name, sassdir, tsv, out_prefix):
    rows = load_table(tsv)
    known_bases = {r[0] for r in rows}
    cache = {}
    tot = collections.Counter()
    rules = collections.Counter()
    rule_files = collections.defaultdict(set)
    unknown = collections.Counter()
    unknown_full = collections.defaultdict(collections.Counter)
    parse_errs, tool_errs, other_codes = [], [], collections.Counter()
    arch = collections.Counter()
    for fn in sorted(os.listdir(sassdir)):
        if not fn.endswith(".stats.json"):
            continue
        stem = fn[: -len(".stats.json")]
        st = json.load(open(os.path.join(sassdir, fn)))
        tot["cubins"] += 1
        arch[st.get("arch", "?")] += 1
        for k in ("functions", "instructions", "bytes", "lines"):
            tot[k] += st.get(k, 0)
        if st.get("disassembler") != "nvdisasm":
            tool_errs.append("%s: nvdisasm failed (%s), used %s" % (stem, st.get("nvdisasm_err", "").strip()[:200], st.get("disassembler")))
        if st.get("lint_rc", 0) not in (0, 1):
            tool_errs.append("%s: fencelint exit %s" % (stem, st.get("lint_rc")))
        for op, n in st.get("opcodes", {}).items():
            if classify(op, rows, cache) == "other":
                base = op.split(".")[0]
                unknown[base] += n
                unknown_full[base][op] += n
        jl = os.path.join(sassdir, stem + ".jsonl")
        if os.path.exists(jl):
            for line in open(jl):
                d = json.loads(line)
                r = d["rule"]
                if r == "parse-error" or r == "input-error" or r == "internal-error":
                    parse_errs.append("%s: %s line %s: %s" % (stem, r, d["span"]["line"], d["message"]))
                    other_codes[r] += 1
                elif r in ("analysis-incomplete", "unused-suppression"):
                    other_codes[r] += 1
                else:
                    rules[r] += 1
                    rule_files[r].add(stem)
    out = []
    out.append("== %s ==" % name)
    out.append("cubins %d (%s), functions %d, instructions %d, text %.2f GB / %d lines" % (
        tot["cubins"], ", ".join("%s %d" % kv for kv in sorted(arch.items())), tot["functions"],
        tot["instructions"], tot["bytes"] / 1e9, tot["lines"]))
    out.append("parse errors: %d" % len(parse_errs))
    out += ["  " + p for p in parse_errs]
    out.append("tool problems: %d" % len(tool_errs))
    out += ["  " + p for p in tool_errs]
    out.append("non-rule diagnostics: %s" % (dict(other_codes) or "none"))
    out.append("findings per rule (all rules selected):")
    for r, n in sorted(rules.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append("  %-34s %7d  in %d cubins" % (r, n, len(rule_files[r])))
    if not rules:
        out.append("  none")
    nu = sum(unknown.values())
    out.append("opcodes the semantics table classifies as `other`: %d instructions, %d bases "
               "(%d bases not in the table at all)" % (nu, len(unknown), len([b for b in unknown if b not in known_bases])))
    for base, n in sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0])):
        tag = "" if base not in known_bases else "  (base in table; these forms fall to `other`)"
        top = ", ".join("%s %d" % kv for kv in unknown_full[base].most_common(3) if kv[0] != base)
        out.append("  %-16s %10d%s%s" % (base, n, tag, ("  e.g. " + top) if top and tag else ""))
    text = "\n".join(out)
    print(text)
    with open(out_prefix + ".txt", "w") as f:
        f.write(text + "\n")
    with open(out_prefix + ".json", "w") as f:
        json.dump({"corpus": name, "totals": dict(tot), "arch": dict(arch), "parse_errors": parse_errs,
                   "tool_problems": tool_errs, "non_rule": dict(other_codes), "findings": dict(rules),
                   "findings_cubins": {r: len(v) for r, v in rule_files.items()},
                   "unknown_opcodes": dict(unknown),
                   "unknown_bases_not_in_table": sorted(b for b in unknown if b not in known_bases)},
                  f, indent=1, sort_keys=True)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "count":
        count(sys.argv[2])
    elif cmd == "sample":
        sample(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6] == "1")
    elif cmd == "report":
        report(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif cmd == "jsonl":
        # the JSON document of fencelint check --format json, one diagnostic a line
        try:
            doc = json.load(open(sys.argv[2]))
        except (OSError, ValueError) as e:
            doc = {"diagnostics": [{"rule": "input-error", "message": "fencelint gave no JSON: %s" % e,
                                    "span": {"line": 0}}]}
        with open(sys.argv[3], "w") as f:
            for d in doc.get("diagnostics", []):
                f.write(json.dumps(d) + "\n")
    elif cmd == "merge":
        # merge STATS KEY=VALUE... (strings; ints when they look like ints)
        path = sys.argv[2]
        st = json.load(open(path)) if os.path.exists(path) else {}
        for kv in sys.argv[3:]:
            k, v = kv.split("=", 1)
            st[k] = int(v) if v.lstrip("-").isdigit() else v
        json.dump(st, open(path, "w"))
PY

cuda_bin="$(find_cuda_bin)"
nvdisasm="$cuda_bin/nvdisasm"
cuobjdump="$cuda_bin/cuobjdump"
fencelint="${FENCELINT:-$repo/target-audit/release/fencelint}"
if [ "$report_only" = 0 ]; then
    if [ ! -x "$fencelint" ]; then
        log "building fencelint into target-audit"
        (cd "$repo" && CARGO_TARGET_DIR="$repo/target-audit" cargo build --release -q -p fencelint-cli) || exit 2
    fi
    [ -x "$nvdisasm" ] || { log "no nvdisasm in $cuda_bin"; exit 2; }
    # fencelint reads the disassembly from /dev/stdin, a pipe. Probe with a clean committed
    # SASS file: a build that read part of a pipe twice (before 2026-12-03 the check for a
    # binary's magic bytes took the first eight) reports a parse error on it.
    probe_file="$repo/fixtures/compiled/sm_90a/ordinary.nvdisasm.sass"
    if ! cat "$probe_file" | "$fencelint" check --format json --fail-level never /dev/stdin \
        > /dev/null 2>&1; then
        log "fencelint cannot lint /dev/stdin (probe with $probe_file failed)"; exit 2
    fi
    log "fencelint: $fencelint ($("$fencelint" --version))"
fi

# lint_one CORPUS_SASS_DIR CUBIN: one cubin, streamed.
lint_one() {
    local sassdir="$1" cubin="$2"
    local stem
    stem="$(basename "$cubin" .cubin)"
    local stats="$sassdir/$stem.stats.json" jl="$sassdir/$stem.jsonl" err="$sassdir/$stem.err"
    [ -s "$stats" ] && grep -q '"lint_rc"' "$stats" && return 0
    local arch
    arch="$(head -c 64 "$cubin" | "$python" -c 'import sys,struct
h=sys.stdin.buffer.read(64); f=struct.unpack_from("<I",h,48)[0]
print("sm_%d" % (((f>>8)&0xff) if h[7]==0x41 else (f&0xff)))')"
    local start=$SECONDS tool=nvdisasm
    "$nvdisasm" -c -g "$cubin" 2> "$err" | "$python" "$helper" count "$stats" \
        | "$fencelint" check --select all --format json --fail-level never /dev/stdin > "$jl.tmp" 2>> "$err"
    local rcs=("${PIPESTATUS[@]}")
    if [ "${rcs[0]}" != 0 ]; then
        local nverr
        nverr="$(head -c 300 "$err" | tr '\n\t"' '   ')"
        tool=cuobjdump
        "$cuobjdump" -sass "$cubin" 2> "$err" | "$python" "$helper" count "$stats" \
            | "$fencelint" check --select all --format json --fail-level never /dev/stdin > "$jl.tmp" 2>> "$err"
        rcs=("${PIPESTATUS[@]}")
        "$python" "$helper" merge "$stats" "nvdisasm_err=$nverr"
    fi
    "$python" "$helper" jsonl "$jl.tmp" "$jl" && rm -f "$jl.tmp"
    "$python" "$helper" merge "$stats" "arch=$arch" "disassembler=$tool" "dis_rc=${rcs[0]}" \
        "lint_rc=${rcs[2]}" "seconds=$((SECONDS - start))" "cubin=$cubin"
    [ -s "$err" ] || rm -f "$err"
    log "$(basename "$sassdir" | sed 's/sass//')$stem $arch: $((SECONDS - start)) s, $tool rc ${rcs[0]}, fencelint rc ${rcs[2]}, $(wc -l < "$jl") diagnostics"
}

# run_list SASS_DIR LISTFILE: the cubins of LISTFILE, $jobs at a time, largest first.
run_list() {
    local sassdir="$1" list="$2"
    mkdir -p "$sassdir"
    export -f lint_one log
    export nvdisasm cuobjdump fencelint python helper
    xargs -r -a <(xargs -r -a "$list" ls -S) -P "$jobs" -I{} bash -c 'lint_one "$0" "$1"' "$sassdir" {}
}

started="$(date -u +%Y-%m-%dT%H:%MZ)"
if [ "$report_only" = 0 ] && [ "$run_nccl" = 1 ]; then
    nccl="$corpus/nccl"
    if [ ! -f "$nccl/libnccl.so.2" ] && ! compgen -G "$nccl/cubins/*.cubin" > /dev/null; then
        SKIP_TRITON=1 SKIP_CUTE=1 "$repo/scripts/vendor-ptx-corpus.sh" || true
    fi
    if ! compgen -G "$nccl/cubins/*.cubin" > /dev/null; then
        mkdir -p "$nccl/cubins"
        (cd "$nccl/cubins" && "$cuobjdump" -xelf all ../libnccl.so.2 > /dev/null) || log "nccl: cuobjdump -xelf failed"
    fi
    if [ "$nccl_arch" = all ]; then
        ls "$nccl"/cubins/*.cubin > "$nccl/list.txt"
    else
        : > "$nccl/list.txt"
        for a in ${nccl_arch//,/ }; do ls "$nccl"/cubins/*."$a".cubin >> "$nccl/list.txt"; done
    fi
    log "nccl: $(wc -l < "$nccl/list.txt") cubins ($nccl_arch)"
    run_list "$nccl/sass" "$nccl/list.txt"
fi

if [ "$report_only" = 0 ] && [ "$run_fi" = 1 ]; then
    fi_dir="$corpus/flashinfer"
    mkdir -p "$fi_dir" "$corpus/wheels"
    if ! compgen -G "$corpus/wheels/flashinfer_cubin-*.whl" > /dev/null; then
        log "flashinfer: downloading the flashinfer-cubin wheel (about 460 MB, 1.9 GB of cubins)"
        "$python" -m pip download --quiet --no-deps flashinfer-cubin -d "$corpus/wheels" || log "flashinfer: pip download failed"
    fi
    wheel="$(ls "$corpus"/wheels/flashinfer_cubin-*.whl 2> /dev/null | tail -n 1)"
    if [ -n "$wheel" ]; then
        "$python" "$helper" sample "$wheel" "$sample" "$fi_dir/cubins" "$fi_dir/list.txt" "$fi_all"
        run_list "$fi_dir/sass" "$fi_dir/list.txt"
    elif compgen -G "$fi_dir/cubins/*.cubin" > /dev/null; then
        # no wheel here (a machine without network): lint the cubins extracted before
        ls "$fi_dir"/cubins/*.cubin > "$fi_dir/list.txt"
        log "flashinfer: no wheel; linting the $(wc -l < "$fi_dir/list.txt") cubins already in $fi_dir/cubins"
        run_list "$fi_dir/sass" "$fi_dir/list.txt"
    fi
fi

if [ "$report_only" = 0 ] && [ "$run_nvshmem" = 1 ]; then
    nv_dir="$corpus/nvshmem"
    mkdir -p "$nv_dir" "$corpus/wheels"
    if ! compgen -G "$corpus/wheels/nvidia_nvshmem_cu13-*.whl" > /dev/null; then
        log "nvshmem: downloading the nvidia-nvshmem-cu13 wheel (about 180 MB)"
        "$python" -m pip download --quiet --no-deps nvidia-nvshmem-cu13 -d "$corpus/wheels" || log "nvshmem: pip download failed"
    fi
    wheel="$(ls "$corpus"/wheels/nvidia_nvshmem_cu13-*.whl 2> /dev/null | tail -n 1)"
    if [ -n "$wheel" ] && ! compgen -G "$nv_dir/cubins/*.cubin" > /dev/null; then
        unpacked="$(mktemp -d)"
        "$python" -m zipfile -e "$wheel" "$unpacked" || log "nvshmem: cannot unpack $wheel"
        lib="$unpacked/nvidia/nvshmem/lib"
        mkdir -p "$nv_dir/cubins" "$unpacked/objects"
        (cd "$nv_dir/cubins" && "$cuobjdump" -xelf all "$lib/libnvshmem_host.so.3" > /dev/null) \
            || log "nvshmem: cuobjdump -xelf of libnvshmem_host.so.3 failed"
        (cd "$unpacked/objects" && ar x "$lib/libnvshmem_device.a") || log "nvshmem: ar x failed"
        for object in "$unpacked"/objects/*.o; do
            # Host-only objects say "does not contain device code"; their cubins are named after
            # the object (init_device.cu.1.sm_75.cubin), so the names do not collide.
            (cd "$nv_dir/cubins" && "$cuobjdump" -xelf all "$object" > /dev/null 2>&1) || true
        done
        rm -rf "$unpacked"
    fi
    if compgen -G "$nv_dir/cubins/*.cubin" > /dev/null; then
        ls "$nv_dir"/cubins/*.cubin > "$nv_dir/list.txt"
        log "nvshmem: $(wc -l < "$nv_dir/list.txt") cubins"
        run_list "$nv_dir/sass" "$nv_dir/list.txt"
    fi
fi

{
    echo "vendor-sass-corpus: $(date -u +%Y-%m-%dT%H:%MZ) (run started $started)"
    echo "tools: $("$nvdisasm" --version 2> /dev/null | tail -n 1); fencelint $("$fencelint" --version 2> /dev/null) at $(git -C "$repo" rev-parse --short HEAD)"
} | tee "$corpus/sass-report-header.txt"
for c in nccl flashinfer nvshmem; do
    if [ -d "$corpus/$c/sass" ]; then
        "$python" "$helper" report "$c" "$corpus/$c/sass" "$tsv" "$corpus/$c/sass-report"
    fi
done
