// Background work yields the cores to ingest. On two cores the reader (parsing into columns) is
// the pipeline's slowest stage while landing, which has slack, keeps waking up beside it; a thread
// that lowers its priority runs when ingest leaves a core free, as RocksDB lowers its compaction
// threads'. The priority is the thread's nice value, which the threads it starts inherit (DuckDB's
// workers, when it opens a database). An unprivileged thread cannot raise it again: only threads
// that keep it lowered until they end may lower it.
#pragma once

namespace skippr {

// How many nice steps background threads take: each step is about 1.25× less CPU share when
// competing, so ingest gets about three times landing's share of a contended core.
inline constexpr int kBackgroundNiceSteps = 5;

// Lowers the calling thread's priority by kBackgroundNiceSteps (best effort: a failure changes
// only speed, so it is ignored).
void LowerThisThreadsPriority();

}  // namespace skippr
