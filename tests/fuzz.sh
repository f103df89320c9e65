#!/usr/bin/env bash
# A bounded run of every fuzz target (cargo fuzz, libFuzzer with AddressSanitizer) from the
# committed corpus: FUZZ_SECONDS each (default 20). A crash fails the run; its input is copied
# to tests/fuzz-regressions/<target>/ so that tests/host/corpus.rs replays it from then on.
# The stable toolchain builds the sanitizer flags with RUSTC_BOOTSTRAP=1.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-20}
export RUSTC_BOOTSTRAP=1
echo "== fuzz: building the targets" >&2
cargo fuzz build -O -a >&2
failed=()
for t in dump itm textdump elf cargo_config pmu_data unwind; do
  extra=()
  [ "$t" = elf ] && extra=(../tests/fixtures)
  log=$(mktemp)
  if cargo fuzz run -O -a "$t" "corpus/$t" "${extra[@]}" -- \
      -max_total_time="$seconds" -max_len=262144 -rss_limit_mb=4096 >"$log" 2>&1; then
    runs=$(grep -Eo 'Done [0-9]+ runs' "$log" | tail -1)
    echo "fuzz $t: ${runs:-done}, no crash in ${seconds} s" >&2
  else
    echo "fuzz $t: CRASH" >&2
    tail -40 "$log" >&2
    mkdir -p "../tests/fuzz-regressions/$t"
    find "artifacts/$t" -type f -exec cp {} "../tests/fuzz-regressions/$t/" \; 2>/dev/null || true
    failed+=("$t")
  fi
  rm -f "$log"
done
# The corpus grows in a run; keep the checkout as committed.
git checkout -q -- corpus 2>/dev/null || true
git clean -qfd corpus 2>/dev/null || true
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in ${failed[*]} (inputs in tests/fuzz-regressions/)" >&2
  exit 1
fi
