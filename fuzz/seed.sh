#!/usr/bin/env bash
# Fills fuzz/corpus/<target>/ from the committed fixtures and the small seed set in
# fuzz/seeds/<target>/. The corpus is not committed (it is megabytes and grows while fuzzing).
# Usage: fuzz/seed.sh [target...]   (default: every target)
set -euo pipefail
fuzz_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$fuzz_dir")"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ptx_parse sass_text sass_json pipeline config baseline)

# Copies the files found by `find "$@"` (at most 256 KiB each, libFuzzer's default -max_len is
# smaller anyway) into one corpus folder, named by content hash so reruns add nothing twice.
copy() {
    local dest="$1"; shift
    mkdir -p "$dest"
    find "$@" -type f -size -256k -print0 2>/dev/null | while IFS= read -r -d '' f; do
        cp -n "$f" "$dest/$(sha1sum "$f" | cut -c1-16)"
    done
}

for t in "${targets[@]}"; do
    dest="$fuzz_dir/corpus/$t"
    case "$t" in
        ptx_parse)
            copy "$dest" "$root/fixtures" "$root/crates/fencelint-ptx/tests/data" -name '*.ptx' ;;
        sass_text)
            copy "$dest" "$root/fixtures" "$root/crates/fencelint-sass/tests/data" \
                \( -name '*.sass' -o -name '*.txt' \) ;;
        sass_json)
            copy "$dest" "$root/fixtures" "$root/crates/fencelint-sass/tests/data" -name '*.json' ;;
        pipeline)
            copy "$dest" "$root/fixtures/ptx" "$root/fixtures/sass" "$root/fixtures/compiled" \
                \( -name '*.ptx' -o -name '*.sass' -o -name '*.json' \) ;;
        config|baseline) mkdir -p "$dest" ;;
        *) echo "seed.sh: unknown target $t" >&2; exit 2 ;;
    esac
    if [ -d "$fuzz_dir/seeds/$t" ]; then copy "$dest" "$fuzz_dir/seeds/$t"; fi
    echo "corpus/$t: $(find "$dest" -type f | wc -l) files"
done
