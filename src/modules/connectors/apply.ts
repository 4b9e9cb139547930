// Carries out an Intent inside the inbox transaction: the key writes, their events (actor `connector`)
// and the key emails (sealed values) commit together with the claimed provider event, or not at all.
import type { Tx } from '../../infra/db'
import { seal } from '../../infra/crypto'
import { byConnector, emit, type Actor } from '../events/outbox'
import { createKeyIn } from '../keys/service'
import type { Key } from '../keys/model'
import * as keys from '../keys/repo'
import { findPolicyWrite } from '../policies/repo'
import type { Intent, Line } from './intents'
import type { Connector, Outcome } from './model'
import * as repo from './repo'

export interface ApplyContext {
  accountId: string
  connector: Connector
  secretKey: Uint8Array
  /** SMTP_URL and MAIL_FROM are set: new keys are queued for email when the connector asks for it. */
  mailEnabled: boolean
}

export interface Applied {
  outcome: Outcome
  detail: string
  keyIds: string[]
  /** Key hashes whose cached state every node must drop once committed. */
  hashes: string[]
}

/** No mapped price: the transaction is rolled back (the event is not claimed) and the refusal shown. */
export class Unmapped extends Error {}

const done = (detail: string, keyIds: string[] = [], hashes: string[] = []): Applied => ({ outcome: 'processed', detail, keyIds, hashes })
const ignored = (detail: string): Applied => ({ outcome: 'ignored', detail, keyIds: [], hashes: [] })

export async function applyIntent(tx: Tx, ctx: ApplyContext, intent: Intent): Promise<Applied> {
  const actor = byConnector(ctx.connector.id)
  switch (intent.kind) {
    case 'none':
      return ignored(intent.detail)
    case 'purchase':
    case 'subscription': {
      for (const ref of [...intent.refs].sort()) await repo.lockRef(tx, ctx.connector.id, ref)
      const existing = await repo.keysOfRefs(tx, ctx.connector.id, intent.refs)
      if (existing.length > 0) {
        await linkAll(tx, ctx, intent.refs, existing)
        if (intent.kind === 'purchase') return ignored(`keys already issued for this purchase: ${existing.join(', ')}`)
        return renew(tx, ctx, actor, existing, intent.periodEnd)
      }
      if (intent.kind === 'subscription' && !intent.create) return ignored('no key for this subscription yet')
      return issue(tx, ctx, actor, intent)
    }
    case 'link': {
      const found = await repo.keysOfRefs(tx, ctx.connector.id, intent.refs)
      await linkAll(tx, ctx, intent.more, found)
      return found.length > 0 ? done(`linked ${intent.more.join(', ')}`, found) : ignored('no key for this invoice')
    }
    case 'suspend':
    case 'reinstate':
    case 'end':
    case 'revoke':
      return change(tx, ctx, actor, intent)
  }
}

async function linkAll(tx: Tx, ctx: ApplyContext, refs: string[], keyIds: string[]) {
  for (const id of keyIds) await repo.linkKey(tx, ctx.connector.id, refs, id)
}

/** A key per mapped line; quantity n multiplies the policy's activation_limit. */
async function issue(tx: Tx, ctx: ApplyContext, actor: Actor, intent: Extract<Intent, { kind: 'purchase' | 'subscription' }>): Promise<Applied> {
  const mapped: { line: Line; policyId: string; limit: number }[] = []
  const unmapped: string[] = []
  for (const line of intent.lines) {
    const mapping = ctx.connector.mappings.find((m) => m.price === line.price)
    const [owned] = mapping ? await tx<{ id: string }[]>`select id from policies where id = ${mapping.policy_id} and account_id = ${ctx.accountId}` : []
    const policy = owned ? await findPolicyWrite(tx, owned.id) : null
    if (!mapping || !policy) unmapped.push(line.price)
    else mapped.push({ line, policyId: mapping.policy_id, limit: Math.min(10_000, policy.activation_limit * line.quantity) })
  }
  if (mapped.length === 0) {
    throw new Unmapped(
      intent.lines.length === 0
        ? 'no price in the payload (a Checkout Session names it in metadata.keyward_price)'
        : `no mapping (or its policy is gone) for ${unmapped.join(', ')}`,
    )
  }
  const keyIds: string[] = []
  const hashes: string[] = []
  let mailed = 0
  for (const { line, policyId, limit } of mapped) {
    const metadata: Record<string, unknown> = { provider: ctx.connector.provider, price: line.price, ...intent.ids }
    const ref = intent.refs[0]
    const externalId = ref === undefined ? null : await freeExternalId(tx, ctx.accountId, `${ctx.connector.provider}:${ref}${mapped.length > 1 ? `:${line.price}` : ''}`)
    if (intent.email) metadata.customer_email = intent.email
    const expiresAt = intent.kind === 'subscription' ? intent.periodEnd : null
    const { key, keyValue, keyHash } = await createKeyIn(
      tx,
      ctx.accountId,
      { policy_id: policyId, ...(line.quantity > 1 ? { activation_limit: limit } : {}) },
      actor,
      { expiresAt, metadata, entitlements: {}, externalId },
    )
    await repo.linkKey(tx, ctx.connector.id, intent.refs, key.id)
    keyIds.push(key.id)
    hashes.push(keyHash)
    if (ctx.connector.email_keys && ctx.mailEnabled && intent.email) {
      await repo.queueMail(tx, { connectorId: ctx.connector.id, accountId: ctx.accountId, keyId: key.id, to: intent.email, valueSealed: seal(ctx.secretKey, keyValue) })
      mailed++
    }
  }
  const parts = [`created ${keyIds.join(', ')}`]
  if (unmapped.length > 0) parts.push(`not mapped: ${unmapped.join(', ')}`)
  if (ctx.connector.email_keys) {
    parts.push(!ctx.mailEnabled ? 'mail is off on this server (no SMTP_URL)' : mailed > 0 ? `emailed to ${intent.email}` : (intent.emailProblem ?? 'no buyer email in the payload'))
  }
  return done(parts.join('; '), keyIds, hashes)
}

/**
 * The key's external_id: the provider and its first object id (the order, checkout session or
 * subscription), with the price when one payment makes several keys. Null when another key of the
 * account holds it already (an import of the same sale, say) or it is over 200 characters: the ids
 * are in the key's metadata either way.
 */
async function freeExternalId(tx: Tx, accountId: string, id: string): Promise<string | null> {
  if (id.length > 200) return null
  const [taken] = await tx`select 1 from license_keys where account_id = ${accountId} and external_id = ${id}`
  return taken ? null : id
}

/** The period end as the key's expiry; a key suspended for a pause is reinstated (never a dispute). */
async function renew(tx: Tx, ctx: ApplyContext, actor: Actor, keyIds: string[], periodEnd: Date | null): Promise<Applied> {
  const changed: string[] = []
  const hashes: string[] = []
  for (const id of keyIds) {
    const locked = await keys.lockKey(tx, ctx.accountId, id)
    if (!locked || locked.status === 'revoked') continue
    let key = (await keys.findKey(tx, ctx.accountId, id))!
    let touched = false
    if (periodEnd && key.expires_at !== periodEnd.toISOString()) {
      await keys.extendKey(tx, id, periodEnd)
      key = (await keys.findKey(tx, ctx.accountId, id))!
      await emit(tx, ctx.accountId, 'key.extended', key, actor)
      touched = true
    }
    if (locked.suspended && key.suspend_reason === 'subscription_paused') {
      await keys.reinstateKey(tx, id)
      await emit(tx, ctx.accountId, 'key.reinstated', (await keys.findKey(tx, ctx.accountId, id))!, actor)
      touched = true
    }
    if (touched) {
      changed.push(id)
      hashes.push(locked.key_hash)
    }
  }
  if (changed.length === 0) return ignored(`already up to date: ${keyIds.join(', ')}`)
  return done(`renewed ${changed.join(', ')}${periodEnd ? ` to ${periodEnd.toISOString()}` : ''}`, changed, hashes)
}

type Change = Extract<Intent, { kind: 'suspend' | 'reinstate' | 'end' | 'revoke' }>

async function change(tx: Tx, ctx: ApplyContext, actor: Actor, intent: Change): Promise<Applied> {
  const keyIds = await repo.keysOfRefs(tx, ctx.connector.id, intent.refs)
  if (keyIds.length === 0) return ignored(`no key for ${intent.refs.join(', ') || 'this object'}`)
  const changed: string[] = []
  const hashes: string[] = []
  for (const id of keyIds) {
    const locked = await keys.lockKey(tx, ctx.accountId, id)
    if (!locked || locked.status === 'revoked') continue
    const before = (await keys.findKey(tx, ctx.accountId, id))!
    const type = await changeOne(tx, id, before, locked.suspended, intent)
    if (!type) continue
    await emit(tx, ctx.accountId, type, (await keys.findKey(tx, ctx.accountId, id))!, actor)
    changed.push(id)
    hashes.push(locked.key_hash)
  }
  if (changed.length === 0) return ignored(`nothing to change on ${keyIds.join(', ')}`)
  const verb = { suspend: `suspended (${reasonOf(intent)})`, reinstate: 'reinstated', end: `set to expire at ${endOf(intent)}`, revoke: 'revoked (refunded)' }[intent.kind]
  return done(`${verb}: ${changed.join(', ')}`, changed, hashes)
}

const reasonOf = (i: Change) => ('reason' in i ? i.reason : '')
const endOf = (i: Change) => (i.kind === 'end' ? i.at.toISOString() : '')

/** One key's change, or null when it is already so; the event type to emit. */
async function changeOne(tx: Tx, id: string, key: Key, suspended: boolean, intent: Change) {
  switch (intent.kind) {
    case 'suspend':
      if (suspended && key.suspend_reason === intent.reason) return null
      // a dispute outranks a pause: a paused key that is disputed stays suspended as disputed
      if (suspended && key.suspend_reason === 'disputed') return null
      await keys.suspendKey(tx, id, intent.reason, null)
      return 'key.suspended' as const
    case 'reinstate':
      if (!suspended || key.suspend_reason !== intent.reason) return null
      await keys.reinstateKey(tx, id)
      return 'key.reinstated' as const
    case 'end':
      if (key.expires_at !== null && new Date(key.expires_at) <= intent.at) return null
      await keys.extendKey(tx, id, intent.at)
      return 'key.extended' as const
    case 'revoke':
      await keys.revokeKey(tx, id, intent.reason)
      return 'key.revoked' as const
  }
}
