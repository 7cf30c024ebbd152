#!/usr/bin/env bash
# A checkpoint written by 2 data-parallel ranks resumes on 1 and on 4 ranks to the same parameters,
# and 10 more steps from it on 1 and on 4 ranks end at the same parameters: checkpoint.sh scenarios
set -euo pipefail
here=$(dirname "$0")
scenarios=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bash "$here/run.sh" 2 "$scenarios" write "$dir" || exit $?
ls "$dir"
for np in 1 4; do bash "$here/run.sh" $np "$scenarios" resume "$dir"; done
"$scenarios" compare "$dir/after_1.safetensors" "$dir/after_4.safetensors"
