#!/usr/bin/env python3
"""Precision audit: every rule over the vendor corpus and the clean fixtures.

Usage:
  scripts/audit-rules.py [--per-rule 20] [--out .corpus/audit] [--classes docs/audit.md]

Corpora (missing ones are skipped and said so):
  nccl-ptx        .corpus/nccl/ptx/*.ptx            (scripts/vendor-ptx-corpus.sh)
  nccl-sass       .corpus/nccl/sass/*.jsonl         (scripts/vendor-sass-corpus.sh; the SASS
                                                     text is not kept, windows are re-disassembled)
  flashinfer-sass .corpus/flashinfer/sass/*.jsonl   (scripts/vendor-sass-corpus.sh)
  triton-ptx      .corpus/triton/*.ptx
  cute-ptx        .corpus/cute/dump/*.ptx
  ordinary        fixtures/compiled/*/ordinary.*    (must give no finding)

Writes to --out: findings.json (counts per rule per corpus), samples.json, and samples.txt: for
each rule a deterministic sample of up to --per-rule findings, spread round-robin over corpora,
files and kernels (ordered by a hash of their names, so the same inputs give the same sample),
each with a window of the PTX/SASS around the finding and around its related locations.

With --classes FILE, the table rows of FILE of the form
  | rule | id | corpus | kernel | class | reason |
(class TP, FP or TP-benign) are matched to the sample by id and the false-positive share per rule
is printed.
"""
import argparse
import collections
import glob
import hashlib
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NON_RULE = {"parse-error", "input-error", "analysis-incomplete", "internal-error", "unused-suppression"}


def fencelint_bin():
    exe = os.environ.get("FENCELINT", os.path.join(REPO, "target-audit/release/fencelint"))
    if not os.path.exists(exe):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "fencelint-cli"], cwd=REPO, check=True,
                       env=dict(os.environ, CARGO_TARGET_DIR=os.path.join(REPO, "target-audit")))
    return exe


def cuda_bin():
    env = os.environ.get("FENCELINT_CUDA_BIN")
    if env:
        return env
    return "/work/cuda-venv/lib/python3.11/site-packages/nvidia/cu13/bin"


def run_lint(paths):
    if not paths:
        return []
    cmd = [fencelint_bin(), "check", "--select", "all", "--format", "json", "--fail-level", "never",
           "--cuda-bin", cuda_bin()] + paths
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        print("fencelint exit %d: %s" % (out.returncode, out.stderr[:500]), file=sys.stderr)
    try:
        return json.loads(out.stdout).get("diagnostics", [])
    except ValueError:
        print("fencelint printed no JSON: %s" % out.stderr[:500], file=sys.stderr)
        return []


def rel(p):
    return os.path.relpath(p, REPO)


def collect():
    corpora = collections.OrderedDict()
    ptx = sorted(glob.glob(os.path.join(REPO, ".corpus/nccl/ptx/*.ptx")))
    corpora["nccl-ptx"] = run_lint([rel(p) for p in ptx]) if ptx else None
    for name in ("nccl", "flashinfer"):
        d = os.path.join(REPO, ".corpus", name, "sass")
        files = sorted(glob.glob(os.path.join(d, "*.jsonl")))
        if not files:
            corpora[name + "-sass"] = None
            continue
        diags = []
        for f in files:
            stem = os.path.basename(f)[: -len(".jsonl")]
            stats = json.load(open(os.path.join(d, stem + ".stats.json")))
            for line in open(f):
                dd = json.loads(line)
                dd["file"] = rel(stats["cubin"])  # the text came from this cubin through /dev/stdin
                dd["_cubin"] = stats["cubin"]
                dd["_disassembler"] = stats.get("disassembler", "nvdisasm")
                diags.append(dd)
        corpora[name + "-sass"] = diags
    tri = sorted(glob.glob(os.path.join(REPO, ".corpus/triton/*.ptx")))
    corpora["triton-ptx"] = run_lint([rel(p) for p in tri]) if tri else None
    cute = sorted(glob.glob(os.path.join(REPO, ".corpus/cute/dump/*.ptx")))
    corpora["cute-ptx"] = run_lint([rel(p) for p in cute]) if cute else None
    ordinary = sorted(glob.glob(os.path.join(REPO, "fixtures/compiled/*/ordinary.*")))
    corpora["ordinary"] = run_lint([rel(p) for p in ordinary])
    return corpora


def h(s):
    return hashlib.sha1(s.encode()).hexdigest()


def finding_id(d):
    return (d.get("fingerprint") or h(json.dumps(d["span"])))[:10]


def sample(diags, n):
    """Round-robin over corpora, then files, then kernels, each ordered by hash."""
    tree = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for d in diags:
        tree[d["_corpus"]][d["file"]][d.get("kernel") or ""].append(d)
    # flatten each corpus into a list that alternates files, and within a file kernels
    per_corpus = []
    for c in sorted(tree):
        files = tree[c]
        queues = []
        for f in sorted(files, key=h):
            kernels = files[f]
            kq = [sorted(kernels[k], key=lambda d: (d["span"]["start"], d["message"])) for k in sorted(kernels, key=h)]
            # one finding per kernel in turn
            seq = []
            while any(kq):
                for q in kq:
                    if q:
                        seq.append(q.pop(0))
            queues.append(seq)
        seq = []
        while any(queues):
            for q in queues:
                if q:
                    seq.append(q.pop(0))
        per_corpus.append(seq)
    out = []
    while len(out) < n and any(per_corpus):
        for q in per_corpus:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def sass_function(cubin, kernel, disassembler):
    """The text of one function, disassembled again (nvdisasm -fun), or None."""
    nvd = os.path.join(cuda_bin(), "nvdisasm")
    r = subprocess.run([nvd, "-c", "-g", "-fun", kernel, cubin], capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        return r.stdout.split("\n")
    # -fun wants a symbol index here: disassemble all and cut out the function's section
    r = subprocess.run([nvd, "-c", "-g", cubin], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    lines = r.stdout.split("\n")
    start = None
    for i, line in enumerate(lines):
        if start is None and line.strip() == ".text.%s:" % kernel:
            start = i
        elif start is not None and line.startswith("//----") and ".text." in line:
            return lines[start:i]
    return lines[start:] if start is not None else None


def sass_window(d, cache, ctx):
    key = (d["_cubin"], d.get("kernel"))
    if key not in cache:
        cache[key] = sass_function(d["_cubin"], d.get("kernel") or "", d["_disassembler"])
    text = cache[key]
    if text is None:
        return ["<could not re-disassemble %s in %s>" % (d.get("kernel"), d["_cubin"])]
    addrs = [(d.get("sass_address"), ctx)] + [(r.get("sass_address"), 4) for r in d.get("related", [])]
    idx = {}
    pat = re.compile(r"/\*([0-9a-f]{4,})\*/")
    for i, line in enumerate(text):
        m = pat.search(line)
        if m:
            idx.setdefault(int(m.group(1), 16), i)
    want, marks = set(), set()
    for a, c in addrs:
        if a is None or a not in idx:
            continue
        i = idx[a]
        marks.add(i)
        want.update(range(max(0, i - c), min(len(text), i + c + 1)))
    out, prev = [], None
    for i in sorted(want):
        if prev is not None and i != prev + 1:
            out.append("   ...")
        out.append("%s %s" % (">>" if i in marks else "  ", text[i].rstrip()))
        prev = i
    return out or ["<addresses not found in the re-disassembly>"]


def read_classes(path):
    classes = {}
    if not path or not os.path.exists(path):
        return classes
    for line in open(path):
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) >= 6 and cols[4].strip("`") in ("TP", "FP", "TP-benign"):
            classes[(cols[0].strip("`"), cols[1].strip("`"))] = cols[4].strip("`")
    return classes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-rule", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(REPO, ".corpus/audit"))
    ap.add_argument("--classes", default=None)
    ap.add_argument("--context", type=int, default=8)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    corpora = collect()
    counts = collections.defaultdict(collections.Counter)
    nonrule = collections.defaultdict(collections.Counter)
    by_rule = collections.defaultdict(list)
    for c, diags in corpora.items():
        if diags is None:
            print("corpus %s: not present, skipped" % c)
            continue
        for d in diags:
            d["_corpus"] = c
            if d["rule"] in NON_RULE:
                nonrule[c][d["rule"]] += 1
            else:
                counts[d["rule"]][c] += 1
                by_rule[d["rule"]].append(d)
    names = [c for c in corpora if corpora[c] is not None]
    lines = ["findings per rule per corpus (--select all)", "%-34s %s" % ("rule", " ".join("%15s" % c for c in names))]
    for r in sorted(counts):
        lines.append("%-34s %s" % (r, " ".join("%15d" % counts[r][c] for c in names)))
    lines.append("%-34s %s" % ("(non-rule diagnostics)", " ".join("%15s" % (sum(nonrule[c].values())) for c in names)))
    for c in names:
        if nonrule[c]:
            lines.append("  %s: %s" % (c, dict(nonrule[c])))
    clean = sum(counts[r]["ordinary"] for r in counts)
    lines.append("ordinary clean kernels: %d findings (%s)" % (clean, "ok" if clean == 0 else "FAIL"))
    print("\n".join(lines))
    json.dump({"counts": {r: dict(v) for r, v in counts.items()}, "non_rule": {c: dict(v) for c, v in nonrule.items()}},
              open(os.path.join(a.out, "findings.json"), "w"), indent=1, sort_keys=True)

    classes = read_classes(a.classes)
    cache = {}
    txt, samples = [], []
    shares = []
    for r in sorted(by_rule):
        picked = sample(by_rule[r], a.per_rule)
        txt.append("=" * 100)
        txt.append("%s: %d findings, %d sampled" % (r, len(by_rule[r]), len(picked)))
        tally = collections.Counter()
        for i, d in enumerate(picked):
            fid = finding_id(d)
            cls = classes.get((r, fid))
            tally[cls or "unclassified"] += 1
            txt.append("-" * 100)
            txt.append("[%s #%d id %s] %s %s kernel %s line %s addr %s%s" % (
                r, i + 1, fid, d["_corpus"], d["file"], d.get("kernel"), d["span"]["line"], d.get("sass_address"),
                "  class " + cls if cls else ""))
            txt.append("  " + d["message"])
            for rr in d.get("related", []):
                txt.append("  related line %s addr %s: %s" % (rr["span"]["line"], rr.get("sass_address"), rr["message"]))
            if d.get("dialect") == "sass" and "_cubin" in d:
                txt += sass_window(d, cache, a.context)
            else:
                locs = [(d["span"]["line"], a.context)] + [(rr["span"]["line"], 3) for rr in d.get("related", [])
                                                            if rr.get("file") == d["file"]]
                txt += ptx_window(d["file"], locs)
            samples.append({"rule": r, "id": fid, "corpus": d["_corpus"], "file": d["file"], "kernel": d.get("kernel"),
                            "line": d["span"]["line"], "sass_address": d.get("sass_address"), "message": d["message"],
                            "class": cls})
        if classes:
            n = sum(v for k, v in tally.items() if k != "unclassified")
            fp = tally["FP"]
            shares.append("%-34s sampled %2d classified %2d: TP %2d, TP-benign %2d, FP %2d (%s)" % (
                r, len(picked), n, tally["TP"], tally["TP-benign"], fp, ("%.0f%%" % (100.0 * fp / n)) if n else "-"))
    open(os.path.join(a.out, "samples.txt"), "w").write("\n".join(txt) + "\n")
    json.dump(samples, open(os.path.join(a.out, "samples.json"), "w"), indent=1)
    print("samples: %s" % os.path.join(a.out, "samples.txt"))
    if shares:
        print("false-positive share of the classified sample:")
        print("\n".join(shares))


def ptx_window(path, locs):
    try:
        text = open(os.path.join(REPO, path), errors="replace").read().split("\n")
    except OSError as e:
        return ["<cannot read %s: %s>" % (path, e)]
    want, marks = set(), set()
    for ln, c in locs:
        marks.add(ln)
        want.update(range(max(1, ln - c), min(len(text), ln + c) + 1))
    out, prev = [], None
    for i in sorted(want):
        if prev is not None and i != prev + 1:
            out.append("   ...")
        out.append("%s%7d  %s" % (">>" if i in marks else "  ", i, text[i - 1]))
        prev = i
    return out


if __name__ == "__main__":
    main()
