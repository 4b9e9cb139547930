// Inactivity release: an active activation that has not validated for its key's
// release_after_seconds is deactivated (reason `inactive`, event `activation.deactivated`) and its
// slot is freed on every node. Runs beside the expiry sweeper on every node, reading Postgres only:
// the validate hot path is not involved (it learns of a release through the key invalidation, like
// any deactivation). Exactly once with any number of nodes: see releaseInactive in repo.ts.
//
// What the job can know. A repeat validate on a node is recorded in memory and reaches
// last_validated_at with that node's next last-seen flush (every FLUSH_INTERVAL_MS, carrying the time
// of the answer, not of the write). So the job waits `grace` = flush interval + 1 s margin (the write's
// own duration and clock skew between nodes and Postgres) beyond release_after_seconds, and the node
// that sweeps writes its own pending last-seen times first. Guaranteed: a device is never released
// less than release_after_seconds after a valid answer given on any node at least one flush interval
// before the sweep (that answer is in Postgres by then). Not covered, by nature of batching: a device
// already overdue that validates on another node during the last flush interval before the sweep
// claims it, a node that crashed with unwritten last-seen times (at most one flush interval of them)
// and a node whose flushes fail for longer than the grace. Such a device's next validate takes a slot
// again if one is free. With the defaults (1 s flush, 1 s sweep) a due device is released within
// release_after_seconds + ≈3 s, inside the contract's + 5 s.
import type { Deps } from '../../deps'
import { releaseInactive } from './repo'

/** Releases per transaction (and per invalidation message: at most KEYS_PER_MESSAGE keys). */
const BATCH = 500
/** Beyond the flush interval: the flush's own duration and clock skew between nodes and Postgres. */
export const RELEASE_MARGIN_MS = 1_000

export function releaseGraceMs(flushIntervalMs: number): number {
  return flushIntervalMs + RELEASE_MARGIN_MS
}

/**
 * One pass: releases every due activation in batches (each batch one transaction with its events),
 * then drops the changed keys from every node's memory. Returns how many activations this call
 * released. `flushFirst`: this node's pending last-seen times, written before anything is judged idle.
 */
export async function releaseInactiveActivations(
  deps: Pick<Deps, 'sql' | 'bus'>,
  opts: { graceMs: number; flushFirst?: () => Promise<void>; batch?: number },
): Promise<number> {
  if (opts.flushFirst) await opts.flushFirst()
  const batch = opts.batch ?? BATCH
  let total = 0
  for (;;) {
    const { released, keys } = await deps.sql.begin((tx) => releaseInactive(tx, opts.graceMs, batch))
    total += released
    // Committed: now the slot is free in Postgres; every node's hot state drops the batch's keys before
    // the next batch, through one message and one wait (a node that misses it stops trusting its
    // memory, as for any write).
    if (keys.length > 0) await deps.bus.publish({ kind: 'keys', keyHashes: keys })
    if (released < batch) return total
  }
}
