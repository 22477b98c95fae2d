#!/usr/bin/env bash
# scripts/bench-compare.sh OLD_REF NEW_REF [--rounds N] [--repeats N] [--only SECTIONS]
#
# Compares two commits on this machine in one session: both are checked out in
# temporary git worktrees and built once, then their benches run in turns,
# round after round, the order swapped every round (old first in odd rounds,
# new first in even ones), so that a change of the machine's speed during the
# session falls on both. Prints the ratio keys of each round side by side, then
# their medians. Only figures of one session compare.
#
# Each run is `npm run bench -- --quick --only SECTIONS --json` (SECTIONS:
# coalesce,delivery,isolation,slow-receivers,idle-webhooks unless given; see
# bench/README.md).
# A commit whose bench has no --only runs the whole quick bench instead, and a
# key it does not measure is shown as "-".
set -euo pipefail

usage() {
  echo "usage: scripts/bench-compare.sh OLD_REF NEW_REF [--rounds N] [--repeats N] [--only SECTIONS]" >&2
  exit 2
}
[[ $# -ge 2 ]] || usage
old_ref=$1
new_ref=$2
shift 2
rounds=3
repeats=''
only='coalesce,delivery,isolation,slow-receivers,idle-webhooks'
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=${2:?}; shift 2 ;;
    --repeats) repeats=${2:?}; shift 2 ;;
    --only) only=${2:?}; shift 2 ;;
    *) usage ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || usage

top=$(git rev-parse --show-toplevel)
old_commit=$(git rev-parse --verify "$old_ref^{commit}")
new_commit=$(git rev-parse --verify "$new_ref^{commit}")
session=$(mktemp -d "${TMPDIR:-/tmp}/aw-bench-compare-XXXXXX")
mkdir -p "$session/logs"
echo "bench-compare: $old_ref ($(git rev-parse --short "$old_commit")) against $new_ref ($(git rev-parse --short "$new_commit")); $rounds round(s); logs in $session/logs" >&2

cleanup() {
  for side in old new; do
    [[ -d $session/$side ]] && git -C "$top" worktree remove --force "$session/$side" 2>/dev/null
  done
  git -C "$top" worktree prune
}
trap cleanup EXIT

# Checks out and builds one side. Its dependencies are this checkout's
# node_modules when both lock files agree (an install per side would take
# minutes), else an install of its own.
prepare() {
  local side=$1 commit=$2 dir=$session/$1
  git -C "$top" worktree add --quiet --detach "$dir" "$commit"
  if [[ -d $top/node_modules ]] && cmp -s "$top/package-lock.json" "$dir/package-lock.json"; then
    ln -s "$top/node_modules" "$dir/node_modules"
  else
    echo "bench-compare: $side: installing its own dependencies (its package-lock.json differs)" >&2
    (cd "$dir" && npm ci --silent) >"$session/logs/$side-install.log" 2>&1
  fi
  (cd "$dir" && npm run --silent build && npm run --silent build:bench) >"$session/logs/$side-build.log" 2>&1
}

# The flags a side's bench understands: a subset where it has --only.
flags_of() {
  local dir=$session/$1
  local flags=(--quick --json)
  if grep -q -- "'--only <sections>'" "$dir/bench/src/main.ts"; then
    # Only the sections this side's bench has: an older side lacks the newer ones.
    local known=() section
    for section in ${only//,/ }; do
      if grep -rqs -- "'$section'" "$dir/bench/src/"; then known+=("$section"); else echo "bench-compare: $1 has no section $section" >&2; fi
    done
    local IFS=,
    flags+=(--only "${known[*]}")
    [[ -n $repeats ]] && flags+=(--repeats "$repeats")
  else
    echo "bench-compare: $1 has no --only: it runs the whole quick bench" >&2
  fi
  echo "${flags[@]}"
}

prepare old "$old_commit"
prepare new "$new_commit"
read -r -a old_flags <<<"$(flags_of old)"
read -r -a new_flags <<<"$(flags_of new)"

# One run of one side: the summary JSON (the last line of its output) into
# round-R-SIDE.json, its seconds into round-R-SIDE.seconds. The pinned Node of
# the side's devDependencies runs it, as `npm run bench` would.
run_side() {
  local round=$1 side=$2 dir=$session/$2
  local -n flags=${side}_flags
  local started=$SECONDS
  echo "bench-compare: round $round: $side..." >&2
  if ! (cd "$dir" && PATH="$dir/node_modules/.bin:$PATH" node scripts/bench.js "${flags[@]}") \
    >"$session/logs/round-$round-$side.out" 2>"$session/logs/round-$round-$side.err"; then
    echo "bench-compare: round $round: $side failed; see $session/logs/round-$round-$side.err" >&2
    exit 1
  fi
  tail -n 1 "$session/logs/round-$round-$side.out" >"$session/round-$round-$side.json"
  echo $((SECONDS - started)) >"$session/round-$round-$side.seconds"
}

for ((round = 1; round <= rounds; round++)); do
  if ((round % 2 == 1)); then order=(old new); else order=(new old); fi
  for side in "${order[@]}"; do run_side "$round" "$side"; done
done

# The table: each key, round by round, old against new, then the medians.
node - "$session" "$rounds" "$old_ref" "$new_ref" <<'TABLE'
const fs = require('node:fs');
const [session, rounds, oldRef, newRef] = process.argv.slice(2);
const KEYS = [
  'delivery.slow_receivers_ratio_to_bound',
  'coalesce.ratio_to_raw_sql',
  'delivery.isolation_p99_over_interval_ms',
  'delivery.ratio_to_durable_baseline',
  'delivery.ratio_to_fair_baseline',
  'delivery.pg_cpu_ratio_to_fair_baseline',
  'delivery.idle_webhooks_ratio',
];
const read = (round, side) => {
  const summary = JSON.parse(fs.readFileSync(`${session}/round-${round}-${side}.json`, 'utf8'));
  const seconds = Number(fs.readFileSync(`${session}/round-${round}-${side}.seconds`, 'utf8'));
  return { summary, seconds };
};
const value = (summary, key) => {
  const [section, figure] = key.split('.');
  const v = summary[section]?.[figure];
  return typeof v === 'number' ? v : undefined;
};
const median = (values) => {
  const sorted = values.filter((v) => v !== undefined).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  const m = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
};
const show = (v) => (v === undefined ? '-' : String(Number(v.toFixed(3))));
const runs = Array.from({ length: Number(rounds) }, (_, i) => ({ old: read(i + 1, 'old'), new: read(i + 1, 'new') }));
const line = (cells) => cells.map((cell, i) => String(cell).padEnd(i === 0 ? 42 : 14)).join('').trimEnd();
const out = [line(['key', 'round', `old ${oldRef}`.slice(0, 13), `new ${newRef}`.slice(0, 13), 'new/old'])];
for (const key of KEYS) {
  runs.forEach((run, i) => {
    const o = value(run.old.summary, key);
    const n = value(run.new.summary, key);
    out.push(line([key, i + 1, show(o), show(n), o && n !== undefined ? show(n / o) : '-']));
  });
  const o = median(runs.map((run) => value(run.old.summary, key)));
  const n = median(runs.map((run) => value(run.new.summary, key)));
  out.push(line([key, 'median', show(o), show(n), o && n !== undefined ? show(n / o) : '-']));
}
out.push('');
out.push(line(['seconds per run', 'round', 'old', 'new']));
runs.forEach((run, i) => out.push(line(['', i + 1, run.old.seconds, run.new.seconds])));
console.log(out.join('\n'));
TABLE
