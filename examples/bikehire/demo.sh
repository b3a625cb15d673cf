#!/usr/bin/env bash
# `make demo`: runs the bundled example end to end with the commands this build has, printing what a
# newcomer should see. Usage: examples/bikehire/demo.sh path/to/skipprd
set -euo pipefail
skipprd=$(realpath "${1:?usage: demo.sh path/to/skipprd}")
cd "$(dirname "${BASH_SOURCE[0]}")"
export DATA_DIR="$PWD/data"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step skipprd --version
"$skipprd" --version
step skipprd doctor
"$skipprd" doctor
step skipprd doctor --output json
"$skipprd" doctor --output json
step skipprd discover --pipeline bikehire --output text
"$skipprd" discover --pipeline bikehire --output text
step skipprd schema --pipeline bikehire
"$skipprd" schema --pipeline bikehire
step skipprd metadata show --pipeline bikehire
"$skipprd" metadata show --pipeline bikehire
printf '\nThe log of these runs is in %s/logs/.\n' "$DATA_DIR"
