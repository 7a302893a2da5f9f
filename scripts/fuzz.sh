#!/usr/bin/env bash
# Runs every Go fuzz target of the module for the given -fuzztime each (default
# 100000x executions), one after another; it fails if any of them finds a failure. Fuzz targets are
# found by name: func FuzzXxx(f *testing.F) in a _test.go file.
set -euo pipefail
fuzztime="${1:-100000x}"
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
