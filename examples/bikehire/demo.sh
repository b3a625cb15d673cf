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
# Start from a clean slate so that the output below is what a newcomer sees.
rm -rf "$DATA_DIR" "$PWD/warehouse"

step skipprd discover --pipeline bikehire --output text
"$skipprd" discover --pipeline bikehire --output text
step skipprd schema --pipeline bikehire
"$skipprd" schema --pipeline bikehire
step skipprd sync --pipeline bikehire --once --output text
"$skipprd" sync --pipeline bikehire --once --output text
step skipprd status
"$skipprd" status
step 'skipprd query --sql "SELECT rider_type, count(*) AS rides, sum(amount) AS revenue, round(avg(duration_seconds) / 60, 1) AS avg_minutes FROM bikehire.bikehire GROUP BY rider_type ORDER BY rides DESC"'
"$skipprd" query --sql "SELECT rider_type, count(*) AS rides, sum(amount) AS revenue, round(avg(duration_seconds) / 60, 1) AS avg_minutes FROM bikehire.bikehire GROUP BY rider_type ORDER BY rides DESC"
step 'skipprd query --sql "SELECT start_station.name AS station, count(*) AS rides FROM bikehire.bikehire GROUP BY 1 ORDER BY 2 DESC LIMIT 5"'
"$skipprd" query --sql "SELECT start_station.name AS station, count(*) AS rides FROM bikehire.bikehire GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
step 'skipprd query --plain --sql "SELECT count(*) AS rides FROM bikehire.bikehire"'
"$skipprd" query --plain --sql "SELECT count(*) AS rides FROM bikehire.bikehire"
# The example's materialised view (transform.aggregates), kept in the store with the WAL cursor,
# and a recompute of it with SQL over the same rows.
step skipprd aggregates show --pipeline bikehire
"$skipprd" aggregates show --pipeline bikehire
step skipprd aggregates verify --pipeline bikehire
"$skipprd" aggregates verify --pipeline bikehire

# The same pipeline with a destination: a local SkipprLake warehouse (Apache Iceberg tables). The
# config is the example plus a data_sinks entry; the first sync lands what the WAL holds.
lake_config="$DATA_DIR/skippr-lake.yml"
sed 's/^pipelines:$/data_sinks:\n  lake:\n    SkipprLake:\n      warehouse: file:\/\/'"${PWD//\//\\/}"'\/warehouse\n      table_namespace: rides\n\npipelines:/; s/^    data_source: data_sources.sample$/&\n    data_sink: data_sinks.lake/' \
  skippr.yml > "$lake_config"
step "cat $lake_config   # the example, landing in a local SkipprLake warehouse"
cat "$lake_config"
step skipprd --config "$lake_config" sync --pipeline bikehire --once --output text
"$skipprd" --config "$lake_config" sync --pipeline bikehire --once --output text
step skipprd --config "$lake_config" status
"$skipprd" --config "$lake_config" status
step 'find warehouse -type f | sort   # the Iceberg table the rows landed in; the WAL is reclaimed'
find warehouse -type f | sort
step "skipprd --config $lake_config query --sql \"SELECT rider_type, count(*) AS rides, sum(amount) AS revenue FROM bikehire.bikehire GROUP BY rider_type ORDER BY rides DESC\""
"$skipprd" --config "$lake_config" query --sql "SELECT rider_type, count(*) AS rides, sum(amount) AS revenue FROM bikehire.bikehire GROUP BY rider_type ORDER BY rides DESC"
printf '\nThe rows are in the Iceberg table %s/warehouse/rides/bikehire (catalog: %s/warehouse/skippr_catalog.db);\n' \
  "$PWD" "$PWD"
printf 'the log of these runs is in %s/logs/.\n' "$DATA_DIR"
