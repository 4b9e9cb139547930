// Inactivity release: an active activation that has not validated for its key's
// release_after_seconds is deactivated (reason `inactive`, event `activation.deactivated`) and its
// seat is freed once every node has dropped the device. Runs beside the expiry sweeper on every node, reading Postgres only:
// the validate hot path is not involved (it learns of a release through the key invalidation, like
// any deactivation). Exactly once with any number of nodes: see releaseInactive in repo.ts.
//
// What the job can know. A repeat validate on a node is recorded in memory and reaches
// last_validated_at with that node's next last-seen flush (every FLUSH_INTERVAL_MS, carrying the time
// of the answer, not of the write). So when a sweep finds anything due, it first asks every node to
// write its pending last-seen times and waits for each to confirm (`bus.barrier()`: a NATS request
// to every node whose Postgres row is live, one second at most), and only then claims what is still
// due. The due test also keeps `grace` = flush interval + 1 s beyond release_after_seconds (clock skew
// between nodes and Postgres, and the fallback below).
// Guaranteed, when every node confirmed: a device is never released if it got a valid answer on any
// node before the sweep began; an answer given during the sweep itself (its few milliseconds) races
// it like any two concurrent writes, and that device's next validate takes a seat again if one is
// free. When a node cannot confirm (NATS down, a node cut off, an older node), the sweep goes on
// with the grace alone: then an answer given on that node at least one flush interval before the
// sweep counts, and one given during the last flush interval may not (logged as a warning). A node
// that crashed loses at most one flush interval of unwritten times. With the defaults (1 s flush,
// 1 s sweep) a due device is released within release_after_seconds + ≈3 s, and 10,000 due at once
// within ≈ + 4 s, inside the contract's + 5 s.
// The release itself goes through the one after-commit path of every release (service.ts,
// `afterRelease`): the released seats stay held until every node has dropped the keys.
import { drainBatches } from '../../infra/batches'
import { anyInactive, releaseInactive } from './repo'
import { afterRelease, seatHoldMs, type SeatDeps } from './service'

/** Releases per transaction (and per invalidation message: at most KEYS_PER_MESSAGE keys). */
const BATCH = 500
/** Beyond the flush interval: the flush's own duration and clock skew between nodes and Postgres. */
export const RELEASE_MARGIN_MS = 1_000

export function releaseGraceMs(flushIntervalMs: number): number {
  return flushIntervalMs + RELEASE_MARGIN_MS
}

/**
 * One pass: when anything is due, every node writes its pending last-seen times (the barrier); then
 * every activation still due is released in batches (each batch one transaction with its events),
 * and the changed keys are dropped from every node's memory before the batch's seats are free.
 * Returns how many activations this call released. A pass with nothing due is one index probe.
 */
export async function releaseInactiveActivations(deps: SeatDeps, opts: { graceMs: number; batch?: number }): Promise<number> {
  if (!(await anyInactive(deps.sql, opts.graceMs))) return 0
  await deps.bus.barrier()
  const batch = opts.batch ?? BATCH
  const holdMs = seatHoldMs(deps.config)
  const { handled } = await drainBatches(batch, async () => {
    const released = await deps.sql.begin((tx) => releaseInactive(tx, opts.graceMs, batch, holdMs))
    // Committed: every node's hot state drops the batch's keys (one message, one wait) before the
    // next batch, and only then are the seats free for other devices.
    if (released.activationIds.length > 0) await afterRelease(deps, released)
    return released.activationIds.length
  })
  return handled
}
