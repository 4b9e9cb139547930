// Reinstate sweeper: a suspension with `suspended_until` ends by itself. Runs beside the expiry
// sweeper on every node. Exactly once with any number of nodes: rows are claimed `for update skip
// locked` and each is reinstated through changeKey (service.ts), whose transition (lifecycle.ts)
// re-checks that the key is still suspended and due, so a key is reinstated (and its key.reinstated
// event, actor system, written) by exactly one transaction; a manual reinstate takes the same row
// lock, so it and the sweep never both act.
//
// Unlike expiry, a suspension is in every node's hot state (validate answers `suspended` from
// memory), so each committed batch is dropped from every node's memory through one bus message and
// one wait, as any other write.
import type { Deps } from '../../deps'
import { drainBatches } from '../../infra/batches'
import { KEYS_PER_MESSAGE } from '../../infra/bus'
import { SYSTEM } from '../events/outbox'
import { changeKey } from './service'

const BATCH = Math.min(500, KEYS_PER_MESSAGE)

/** One pass: reinstates every key whose suspended_until has come, in batches; returns how many. */
export async function reinstateDueKeys(deps: Pick<Deps, 'sql' | 'bus'>, batch = BATCH): Promise<number> {
  const { handled } = await drainBatches(batch, async () => {
    const hashes = await deps.sql.begin(async (tx) => {
      // `at`: the database's clock, the one suspended_until was compared with
      const due = await tx<{ id: string; account_id: string; at: Date }[]>`
        select id, account_id, now() as at from license_keys where suspended_until <= now()
        order by suspended_until limit ${batch} for update skip locked`
      const hashes: string[] = []
      for (const { id, account_id, at } of due) {
        const done = await changeKey(tx, SYSTEM, account_id, id, { kind: 'reinstate', dueAt: at })
        if (done.kind === 'changed') hashes.push(done.keyHash)
      }
      return hashes
    })
    if (hashes.length > 0) await deps.bus.publish({ kind: 'keys', keyHashes: hashes })
    return hashes.length
  })
  return handled
}
