#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time, starting from valid inputs written by fuzz_seed.
set -u
build=${1:-build-fuzz}
seconds=${2:-15}
work="$build/fuzz-work"
rm -rf "$work"
mkdir -p "$work/corpus-envelope" "$work/corpus-log" "$work/corpus-ast" "$work/corpus-stages" "$work/corpus-api" "$work/corpus-loaders" \
  "$work/artifacts"
"$build/fuzz_seed" "$work/corpus-envelope" "$work/corpus-log" "$work/corpus-ast" "$work/corpus-stages" "$work/corpus-loaders" ||
  { echo "fuzz_seed failed"; exit 1; }
status=0
head -c 4096 /dev/urandom > "$work/corpus-api/random" # the API target needs no seed: any bytes are a program
for target in envelope log ast stages api loaders; do
  out="$work/$target.out"
  "$build/fuzz_$target" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=1024 -malloc_limit_mb=512 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus-$target" >"$out" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out" | grep -o '[0-9]*$')
  if [ $rc -ne 0 ]; then
    echo "fuzz_$target: FAILED (exit $rc) after ${runs:-?} inputs:"
    grep -E 'ERROR|SUMMARY|Test unit written' "$out" | head -20
    status=1
  else
    echo "fuzz_$target: ${runs:-?} inputs in ${seconds}s, no crash"
  fi
done
exit $status
