// Reinstate sweeper: a suspension with `suspended_until` ends by itself. Runs beside the expiry
// sweeper on every node. Exactly once with any number of nodes: rows are claimed `for update skip
// locked` and the update re-checks that the key is still suspended and due, so a key is reinstated
// (and its key.reinstated event, actor system, written) by exactly one transaction; a manual
// reinstate takes the same row lock, so it and the sweep never both act.
//
// Unlike expiry, a suspension is in every node's hot state (validate answers `suspended` from
// memory), so each committed batch is dropped from every node's memory through one bus message and
// one wait, as any other write.
import type { Deps } from '../../deps'
import { drainBatches } from '../../infra/batches'
import { KEYS_PER_MESSAGE } from '../../infra/bus'
import { emit, SYSTEM } from '../events/outbox'
import { findKeysByIds } from './repo'

const BATCH = Math.min(500, KEYS_PER_MESSAGE)

/** One pass: reinstates every key whose suspended_until has come, in batches; returns how many. */
export async function reinstateDueKeys(deps: Pick<Deps, 'sql' | 'bus'>, batch = BATCH): Promise<number> {
  const { handled } = await drainBatches(batch, async () => {
    const hashes = await deps.sql.begin(async (tx) => {
      const rows = await tx<{ id: string; key_hash: string }[]>`with due as (
          select id from license_keys where suspended_until <= now()
          order by suspended_until limit ${batch} for update skip locked)
        update license_keys k set suspended_at = null, suspend_reason = null, suspended_until = null, updated_at = now()
        from due where k.id = due.id and k.suspended_at is not null and k.suspended_until <= now()
        returning k.id, k.key_hash`
      if (rows.length === 0) return []
      for (const { accountId, key } of await findKeysByIds(tx, rows.map((r) => r.id))) {
        await emit(tx, accountId, 'key.reinstated', key, SYSTEM)
      }
      return rows.map((r) => r.key_hash)
    })
    if (hashes.length > 0) await deps.bus.publish({ kind: 'keys', keyHashes: hashes })
    return hashes.length
  })
  return handled
}
