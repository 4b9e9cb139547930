// one_key_per_device for imported keys (docs/decisions.md, "Import and export of keys"): a device an
// import brings on a key of such a policy is recorded for the policy in the import's transaction, as
// validate's and an offline license's claim records it (activations/repo.ts, takeSeat), so no other
// key of the policy answers valid for it afterwards. A device the policy already records for another
// key, or that two rows of the file bring, is a bad row: the import would grant what validate refuses.
import type { FieldError } from '../../core/errors'
import type { Tx } from '../../infra/db'
import type { CheckedRow } from './import-rows'

type Fail = (line: number, externalId: string | null, errors: FieldError[]) => void

/**
 * Checks the (policy, device) pairs of the rows to be created against the file and the account's
 * record; reports conflicts through `fail`. Returns the policies that record devices, for `recordDevices`.
 * Fingerprints arrive lower-cased (import-rows.ts), as validate stores them.
 */
export async function checkDevices(tx: Tx, accountId: string, rows: readonly CheckedRow[], fail: Fail): Promise<ReadonlySet<string>> {
  const policyIds = [...new Set(rows.flatMap((r) => (r.policyId !== null && r.activations.length > 0 ? [r.policyId] : [])))]
  if (policyIds.length === 0) return new Set()
  const flagged = new Set(
    (await tx<{ id: string }[]>`select id from policies
      where account_id = ${accountId} and id = any(${policyIds}::text[]) and one_key_per_device`).map((p) => p.id),
  )
  if (flagged.size === 0) return flagged
  const pairs = devicePairs(rows, flagged)
  const held = new Set(
    (
      await tx<{ pair: string }[]>`select d.policy_id || ' ' || d.device_fingerprint as pair from policy_devices d
        join unnest(${pairs.map((p) => p.policyId)}::text[], ${pairs.map((p) => p.fingerprint)}::text[]) as r(policy_id, device_fingerprint)
          using (policy_id, device_fingerprint)`
    ).map((r) => r.pair),
  )
  const seen = new Set<string>()
  for (const { row, index, policyId, fingerprint } of pairs) {
    const pair = `${policyId} ${fingerprint}`
    const field = `activations.${index}.device_fingerprint`
    if (held.has(pair)) fail(row.line, row.externalId, [{ field, message: `activated another key of policy ${policyId} (one_key_per_device)` }])
    else if (seen.has(pair)) fail(row.line, row.externalId, [{ field, message: `appears on an earlier row's key of policy ${policyId} (one_key_per_device)` }])
    seen.add(pair)
  }
  return flagged
}

/** Writes the pairs of the created keys (`keyIds[i]` is `rows[i]`'s): a racing claim of one makes the import fail (23505). */
export async function recordDevices(tx: Tx, flagged: ReadonlySet<string>, rows: readonly CheckedRow[], keyIds: readonly string[]): Promise<void> {
  if (flagged.size === 0) return
  const keyOf = new Map(rows.map((r, i) => [r, keyIds[i]!]))
  const pairs = devicePairs(rows, flagged)
  if (pairs.length === 0) return
  await tx`insert into policy_devices (policy_id, device_fingerprint, key_id)
    select * from unnest(${pairs.map((p) => p.policyId)}::text[], ${pairs.map((p) => p.fingerprint)}::text[],
      ${pairs.map((p) => keyOf.get(p.row)!)}::text[])`
}

function devicePairs(rows: readonly CheckedRow[], flagged: ReadonlySet<string>) {
  return rows.flatMap((row) =>
    row.policyId !== null && flagged.has(row.policyId)
      ? row.activations.map((a, index) => ({ row, index, policyId: row.policyId!, fingerprint: a.fingerprint }))
      : [],
  )
}
