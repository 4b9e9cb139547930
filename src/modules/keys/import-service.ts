// POST /v1/keys/import: every row checked, then all written in one transaction or none (docs/api.md, "Import and export").
// A row whose external_id the account already has is skipped, so running a file again is safe. Where a
// key is stored (key_hash) is decided per row: its portable hash when no other account holds it, else
// the account-scoped hash derived from it; a hash-only row waits under its pending hash (crypto.ts).
import { customerColumns } from '../../core/customer'
import type { Deps } from '../../deps'
import type { RecordCreated } from '../../infra/record-created'
import { newId, pendingKeyHash, scopedKeyHash } from '../../infra/crypto'
import { AppError, type FieldError, type RowErrors } from '../../core/errors'
import { emit, type Actor } from '../events/outbox'
import { parseRows, type ImportFormat } from './import-parse'
import { checkRow, type CheckedRow } from './import-rows'
import { newKeyTerms } from './new-key'
import { checkDevices, recordDevices } from './import-devices'
import * as repo from './import-repo'

export interface ImportAnswer {
  created: number
  skipped: number
  keys: { line: number; id: string; external_id: string | null }[]
}
export interface DryRunAnswer {
  dry_run: true
  would_create: number
  would_skip: number
}

/**
 * Checking and building 10,000 rows is a few hundred milliseconds of JavaScript: done in slices, with
 * the event loop free between them, so the node's validate answers do not wait for a whole import.
 */
const YIELD_EVERY = 500
const breathe = () => new Promise<void>((resolve) => setImmediate(resolve))

/** The hashes a batch of bus messages carries at most (a message stays far below NATS's 1 MB). */
const HASHES_PER_MESSAGE = 2_000

/**
 * `who`: the account imported into and who did it (an API key; the operator from the CLI), for the event.
 * Only the store and the bus are used, so the CLI runs it without a node.
 */
export async function importKeys(
  deps: Pick<Deps, 'sql' | 'bus'>,
  who: { accountId: string; actor: Actor },
  input: { format: ImportFormat; body: unknown; dryRun: boolean },
  record?: RecordCreated,
): Promise<ImportAnswer | DryRunAnswer> {
  const raw = await parseRows(input.format, input.body)
  const accountId = who.accountId
  const outcome = await deps.sql
    .begin(async (tx) => {
      const catalog = await repo.loadCatalog(tx, accountId)
      const bad = new Map<number, RowErrors>()
      const fail = (line: number, externalId: string | null, errors: FieldError[]) => {
        const entry = bad.get(line) ?? { line, external_id: externalId, errors: [] }
        entry.errors.push(...errors)
        bad.set(line, entry)
      }
      const rows: CheckedRow[] = []
      for (const [i, r] of raw.entries()) {
        if (i % YIELD_EVERY === YIELD_EVERY - 1) await breathe()
        const externalId = typeof r.fields?.external_id === 'string' ? r.fields.external_id : null
        if (r.fields === null) fail(r.line, null, [r.problem!])
        else {
          const checked = checkRow(r.line, r.fields, catalog)
          if ('errors' in checked) fail(r.line, externalId, checked.errors)
          else rows.push(checked.row)
        }
      }

      // re-runs: rows whose external_id the account has are skipped (a repeat inside the file is a bad row)
      const existing = await repo.existingExternalIds(tx, accountId, rows.flatMap((r) => (r.externalId === null ? [] : [r.externalId])))
      const seenIds = new Set<string>()
      const fresh: CheckedRow[] = []
      let skipped = 0
      for (const r of rows) {
        if (r.externalId !== null && existing.has(r.externalId)) skipped++
        else if (r.externalId !== null && seenIds.has(r.externalId)) fail(r.line, r.externalId, [{ field: 'external_id', message: 'appears twice in the file' }])
        else {
          if (r.externalId !== null) seenIds.add(r.externalId)
          fresh.push(r)
        }
      }

      // values: unique per account, in the file and against what the account holds
      const portable = fresh.flatMap((r) => (r.lookup.kind === 'portable' ? [r.lookup.hash] : []))
      const held = await repo.existingHashes(tx, [...portable, ...portable.map((h) => scopedKeyHash(accountId, h))])
      const digests = fresh.flatMap((r) => (r.lookup.kind === 'sha256' ? [r.lookup.sha256] : r.valueSha256 !== null ? [r.valueSha256] : []))
      const waiting = await repo.existingSha256(tx, accountId, digests)
      const seenValues = new Set<string>()
      const placed: { row: CheckedRow; keyHash: string; portableHash: string | null }[] = []
      for (const [i, r] of fresh.entries()) {
        if (i % YIELD_EVERY === YIELD_EVERY - 1) await breathe()
        const field = r.lookup.kind === 'sha256' ? 'key_sha256' : r.valueSha256 !== null ? 'key' : 'key_hash'
        const marks = r.lookup.kind === 'sha256' ? [`s:${r.lookup.sha256}`] : [`p:${r.lookup.hash}`, ...(r.valueSha256 ? [`s:${r.valueSha256}`] : [])]
        if (marks.some((m) => seenValues.has(m))) {
          fail(r.line, r.externalId, [{ field, message: 'appears twice in the file (only its first row is imported)' }])
          continue
        }
        marks.forEach((m) => seenValues.add(m))
        if (r.lookup.kind === 'sha256') {
          if (waiting.has(r.lookup.sha256)) fail(r.line, r.externalId, [{ field, message: 'already exists in this account' }])
          else placed.push({ row: r, keyHash: pendingKeyHash(accountId, r.lookup.sha256), portableHash: null })
          continue
        }
        const p = r.lookup.hash
        const scoped = scopedKeyHash(accountId, p)
        if (held.get(p) === accountId || held.has(scoped) || (r.valueSha256 !== null && waiting.has(r.valueSha256))) {
          fail(r.line, r.externalId, [{ field, message: 'already exists in this account' }])
        } else if (held.has(p)) placed.push({ row: r, keyHash: scoped, portableHash: p }) // another account's value too
        else placed.push({ row: r, keyHash: p, portableHash: null })
      }

      // one_key_per_device: the devices the rows bring, against the policy's record (import-devices.ts)
      const devicePolicies = await checkDevices(tx, accountId, placed.map((p) => p.row), fail)

      if (bad.size > 0) {
        const list = [...bad.values()].sort((a, b) => a.line - b.line)
        throw new AppError('import_invalid', `${list.length} of ${raw.length} rows are invalid; nothing was imported`, { rows: list })
      }
      if (input.dryRun) return { answer: { dry_run: true, would_create: placed.length, would_skip: skipped } as DryRunAnswer, hashes: [] }

      const now = new Date()
      const keys: repo.KeyInsert[] = []
      const activations: repo.ActivationInsert[] = []
      const sha: { key_id: string; account_id: string; sha256: string }[] = []
      for (const [i, { row: r, keyHash, portableHash }] of placed.entries()) {
        if (i % YIELD_EVERY === YIELD_EVERY - 1) await breathe()
        const id = newId('key')
        const policy = r.policyId === null ? undefined : catalog.policies.get(r.policyId)
        const createdAt = r.createdAt ?? now
        // the terms create gives a new key (new-key.ts); a first_activation key with devices expires a
        // duration after its first; the policy's credits' refill period counts from the import (an
        // export's balance already has the refills due before it)
        const terms = newKeyTerms(
          {
            own: r.ownFields,
            activationLimit: r.settings.activation_limit,
            expiresAt: r.expiresAt,
            firstActivation: r.activations.length === 0 ? null : new Date(Math.min(...r.activations.map((a) => a.activatedAt.getTime()))),
            credits: r.credits,
          },
          policy ?? null,
          createdAt,
        )
        const credits = terms.credits
        const since = credits !== null && 'since' in credits ? credits.since : null
        keys.push({
          id,
          account_id: accountId,
          product_id: r.productId,
          key_hash: keyHash,
          portable_hash: portableHash,
          key_prefix: r.keyPrefix,
          external_id: r.externalId,
          ...r.settings,
          activation_limit: terms.activationLimit,
          expires_at: terms.expiresAt?.toISOString() ?? null,
          status: r.status === 'revoked' ? 'revoked' : 'active',
          revoked_at: r.status === 'revoked' ? now.toISOString() : null,
          revoke_reason: r.status === 'revoked' ? r.revokeReason : null,
          suspended_at: r.status === 'suspended' ? now.toISOString() : null,
          suspend_reason: r.status === 'suspended' ? r.suspendReason : null,
          suspended_until: r.status === 'suspended' ? (r.suspendedUntil?.toISOString() ?? null) : null,
          metadata: r.metadata,
          ...customerColumns(r.customer),
          entitlements: r.entitlements,
          policy_id: r.policyId,
          own_fields: terms.ownFields,
          created_at: createdAt.toISOString(),
          pending_duration: terms.pendingDuration,
          credits_remaining: credits?.remaining ?? null,
          credits_refill: credits?.refill ?? null,
          credits_since: credits ? (since ?? now).toISOString() : null,
        })
        const releaseAfter = r.policyId === null || r.ownFields.includes('release_after_seconds') ? r.settings.release_after_seconds : (policy?.release_after_seconds ?? null)
        for (const a of r.activations) {
          activations.push({
            id: newId('act'),
            account_id: accountId,
            key_id: id,
            product_id: r.productId,
            device_fingerprint: a.fingerprint,
            device_name: a.name,
            app_version: a.appVersion,
            activated_at: a.activatedAt.toISOString(),
            release_after_seconds: releaseAfter,
          })
        }
        if (r.lookup.kind === 'sha256') sha.push({ key_id: id, account_id: accountId, sha256: r.lookup.sha256 })
      }
      await repo.insertKeys(tx, keys)
      await repo.insertActivations(tx, activations)
      await recordDevices(tx, devicePolicies, placed.map((p) => p.row), keys.map((k) => k.id))
      await repo.insertSha256(tx, sha)
      if (keys.length > 0) {
        // one event for the whole import, never one per key
        const productIds = [...new Set(keys.map((k) => k.product_id))].sort()
        await emit(tx, accountId, 'keys.imported', { count: keys.length, product_ids: productIds }, who.actor)
      }
      const answer: ImportAnswer = {
        created: keys.length,
        skipped,
        keys: placed.map(({ row }, i) => ({ line: row.line, id: keys[i]!.id, external_id: row.externalId })),
      }
      return { answer: record ? await record(tx, answer) : answer, hashes: keys.map((k) => k.key_hash) }
    })
    .catch((err: unknown) => {
      // a concurrent import (or create) took a value or external_id of this file between the checks and the write
      if ((err as { code?: string }).code === '23505') {
        throw new AppError('import_invalid', 'Another write took a key value or external_id of this file meanwhile; nothing was imported. Run the import again', { rows: [] })
      }
      throw err
    })
  // A node may hold a negative ("not_found") entry for a new value: drop them everywhere before answering.
  for (let i = 0; i < outcome.hashes.length; i += HASHES_PER_MESSAGE) {
    await deps.bus.publish({ kind: 'keys', keyHashes: outcome.hashes.slice(i, i + HASHES_PER_MESSAGE) })
  }
  return outcome.answer
}

