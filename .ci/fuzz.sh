#!/usr/bin/env bash
# Runs every Fuzz target in the module for a bounded time each.
set -euo pipefail
fuzztime="${1:-20s}"
found=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    found=$((found+1))
    echo "fuzz: ./$dir $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "./$dir"
  done
done < <(git ls-files '*_test.go')
echo "fuzz: ran $found target(s)"
