#!/usr/bin/env bash
# Runs fuzz targets one after another for a given time each, continuing past crashes (libFuzzer
# fork mode: crashes, timeouts and out-of-memory inputs are saved under fuzz/artifacts/<target>/
# and fuzzing goes on). Logs go to fuzz/logs/<target>.log; the summary line of each run (time,
# executions, artifacts) is appended to fuzz/logs/summary.txt.
# Usage: fuzz/campaign.sh target:seconds...
set -uo pipefail
fuzz_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$fuzz_dir"
mkdir -p logs
for arg in "$@"; do
    t="${arg%%:*}"; seconds="${arg##*:}"
    ./seed.sh "$t" >/dev/null
    mkdir -p "artifacts/$t"
    start=$(date +%s)
    cargo +nightly fuzz run -s none "$t" "corpus/$t" -- \
        -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -timeout=10 -rss_limit_mb=2048 -max_total_time="$seconds" -max_len=65536 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"logs/$t.log" 2>&1
    rc=$?
    end=$(date +%s)
    execs=$(grep -oE '^#[0-9]+' "logs/$t.log" | tail -1 | tr -d '#')
    crashes=$(grep -oE 'oom/timeout/crash: [0-9/]+' "logs/$t.log" | tail -1)
    echo "$t: $((end - start)) s, ${execs:-?} executions, ${crashes:-oom/timeout/crash: ?}, rc $rc, artifacts: $(ls "artifacts/$t" | wc -l)" >>logs/summary.txt
done
