#!/usr/bin/env bash
# Size and wall time of the core install (README "Quick start") of a source tree, in a fresh venv.
#   bench/speed/core_install.sh SRC_DIR VENV_DIR LABEL
# SRC_DIR: a clean copy of the tree (e.g. `git archive HEAD | tar -x -C SRC_DIR`), so the checkout is untouched.
set -euo pipefail
src=$1; venv=$2; label=$3
rm -rf "$venv"
start=$(date +%s.%N)
python3 -m venv "$venv" && . "$venv/bin/activate"
pip install -q torch==2.13.0 && pip install -q -e "$src"
end=$(date +%s.%N)
echo "$label install_s=$(echo "$end - $start" | bc)"
echo "$label size=$(du -sm "$venv" | cut -f1) MiB"
echo "$label packages=$(pip list 2>/dev/null | tail -n +3 | wc -l)"
