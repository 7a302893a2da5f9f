#!/usr/bin/env bash
# Runs every Go fuzz target of the module for the given time each (default
# 15s), one after another, and fails on the first crash. Fuzz targets are
# found by name: func FuzzXxx(f *testing.F) in a _test.go file.
set -euo pipefail
fuzztime="${1:-15s}"
cd "$(dirname "$0")/.."
status=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	echo "== fuzz $pkg $name ($fuzztime)"
	if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg"; then
		echo "FAIL: fuzz target $name in $pkg found a failure (see testdata/fuzz/$name in that package)"
		status=1
	fi
done < <(git ls-files -co --exclude-standard -- '*_test.go' | xargs grep -HoE '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' | sed -E 's/^(.*):func (Fuzz[A-Za-z0-9_]+)\(.*/\1:\2/' | sort -u)
exit $status
