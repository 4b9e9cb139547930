// The background sweeps (expiry, reinstatement, inactivity release, the retention of events and of
// connectors' history) all work the same way: one short transaction per batch, repeated while a batch
// comes back full, so no sweep holds locks for long and a large backlog drains in one pass. This is
// that loop, written once.

/** A batch's outcome: how many rows it handled, or null when the sweep must stop now (e.g. another node holds its lock). */
export type BatchResult = number | null

/**
 * Runs `batch` until one handles fewer than `size` rows, returns null, or `budget.left` batches have
 * run (the budget is shared when several drains of one pass must stay within one bound).
 * Returns the rows handled and whether a batch asked to stop.
 */
export async function drainBatches(
  size: number,
  batch: () => Promise<BatchResult>,
  budget: { left: number } = { left: Number.POSITIVE_INFINITY },
): Promise<{ handled: number; stopped: boolean }> {
  let handled = 0
  while (budget.left > 0) {
    budget.left--
    const n = await batch()
    if (n === null) return { handled, stopped: true }
    handled += n
    if (n < size) break
  }
  return { handled, stopped: false }
}
