// Expiry sweeper: flips the stored status of keys past expires_at to 'expired' and writes key.expired
// in the same transaction. Exactly once with any number of nodes sweeping: rows are claimed with
// `for update skip locked` and the update only matches keys still stored as 'active', so a key is
// flipped (and its event written) by exactly one transaction.
//
// It stays one set-based UPDATE rather than a changeKey per key (keys/lifecycle.ts): expiry is not a
// change anyone asks for but the clock's, it can reach many keys at once, and the flip is the rule
// key_effective_status already applies everywhere (a stored-active key past expires_at is expired),
// so there is no other rule for the transitions to share.
//
// No invalidation is published: every answer already treats a key past expires_at as expired (the
// hot state compares expires_at itself), so the flip changes no answer anywhere.
import { drainBatches } from '../../infra/batches'
import type { Sql } from '../../infra/db'
import { emit, SYSTEM } from '../events/outbox'
import { findKeysByIds } from './repo'

const BATCH = 500

/** One pass: sweeps every due key in batches; returns how many keys this call expired. */
export async function sweepExpiredKeys(sql: Sql, batch = BATCH): Promise<number> {
  const { handled } = await drainBatches(batch, () =>
    sql.begin(async (tx) => {
      const flipped = await tx<{ id: string }[]>`with due as (
          select id from license_keys where status = 'active' and expires_at <= now()
          order by expires_at limit ${batch} for update skip locked)
        update license_keys k set status = 'expired', updated_at = now()
        from due where k.id = due.id and k.status = 'active'
        returning k.id`
      if (flipped.length === 0) return 0
      for (const { accountId, key } of await findKeysByIds(tx, flipped.map((r) => r.id))) {
        await emit(tx, accountId, 'key.expired', key, SYSTEM)
      }
      return flipped.length
    }),
  )
  return handled
}
