// Carries out an Intent inside the inbox transaction: the key writes, their events (actor `connector`)
// and the key emails (sealed values) commit together with the claimed provider event, or not at all.
import { TEXT_MAX, type Customer } from '../../core/customer'
import type { Tx } from '../../infra/db'
import { seal } from '../../infra/crypto'
import { byConnector, type Actor } from '../events/outbox'
import { changeKey, createKeyIn, type Changed } from '../keys/service'
import type { Change } from '../keys/lifecycle'
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
      { expiresAt, metadata, entitlements: {}, externalId, customer: buyerOf(intent) },
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
 * The new key's customer: the buyer's e-mail (lower-cased), name and the provider's customer id (an
 * id too long for the field is left out rather than cut: a cut id would name no one). Null when the
 * payload names none of them.
 */
function buyerOf(intent: Extract<Intent, { kind: 'purchase' | 'subscription' }>): Customer | null {
  const id = intent.ids.customer
  const customer: Customer = {}
  if (intent.email) customer.email = intent.email.toLowerCase()
  if (intent.name) customer.name = intent.name
  if (id && [...id].length <= TEXT_MAX && !/[\u0000-\u001F\u007F-\u009F]/.test(id)) customer.external_id = id
  return Object.keys(customer).length > 0 ? customer : null
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

/**
 * The period end as the key's expiry; a key suspended for a pause is reinstated (never a dispute).
 * A revoked key stays revoked: the renewal is refused for it and the inbox says so (docs/decisions.md).
 */
async function renew(tx: Tx, ctx: ApplyContext, actor: Actor, keyIds: string[], periodEnd: Date | null): Promise<Applied> {
  const changed: string[] = []
  const hashes: string[] = []
  const refused: string[] = []
  for (const id of keyIds) {
    const steps: Change[] = [...(periodEnd ? [{ kind: 'renew', expiresAt: periodEnd } as const] : []), { kind: 'reinstate', reason: 'subscription_paused' }]
    let touched: Changed | null = null
    for (const step of steps) {
      const done = await changeKey(tx, actor, ctx.accountId, id, step)
      if (done.kind === 'refused') {
        refused.push(id)
        break
      }
      if (done.kind === 'changed') touched = done
    }
    if (touched) {
      changed.push(id)
      hashes.push(touched.keyHash)
    }
  }
  const rest = keyIds.filter((id) => !changed.includes(id) && !refused.includes(id))
  const parts = [...(rest.length > 0 ? [`already up to date: ${rest.join(', ')}`] : []), ...refusedPart(refused)]
  if (changed.length === 0) return ignored(parts.join('; '))
  return done([`renewed ${changed.join(', ')}${periodEnd ? ` to ${periodEnd.toISOString()}` : ''}`, ...refusedPart(refused)].join('; '), changed, hashes)
}

/**
 * The keys a change was refused for, named in the inbox's detail (the console shows it): a revoked key
 * is never brought back or changed by a provider's event (docs/decisions.md, docs/payments.md).
 */
const refusedPart = (ids: string[]) => (ids.length === 0 ? [] : [`not changed, revoked (revoking is final): ${ids.join(', ')}`])

type Lifecycle = Extract<Intent, { kind: 'suspend' | 'reinstate' | 'end' | 'revoke' }>

/** The key change an intent asks for (the rules are lifecycle.ts's, shared with the API). */
function changeOf(intent: Lifecycle): Change {
  switch (intent.kind) {
    case 'suspend':
      return { kind: 'hold', reason: intent.reason }
    case 'reinstate':
      return { kind: 'reinstate', reason: intent.reason }
    case 'end':
      return { kind: 'end', at: intent.at }
    case 'revoke':
      return { kind: 'revoke', reason: intent.reason }
  }
}

async function change(tx: Tx, ctx: ApplyContext, actor: Actor, intent: Lifecycle): Promise<Applied> {
  const keyIds = await repo.keysOfRefs(tx, ctx.connector.id, intent.refs)
  if (keyIds.length === 0) return ignored(`no key for ${intent.refs.join(', ') || 'this object'}`)
  const changed: string[] = []
  const hashes: string[] = []
  const refused: string[] = []
  for (const id of keyIds) {
    const done = await changeKey(tx, actor, ctx.accountId, id, changeOf(intent))
    if (done.kind === 'refused') refused.push(id)
    if (done.kind !== 'changed') continue
    changed.push(id)
    hashes.push(done.keyHash)
  }
  const rest = keyIds.filter((id) => !changed.includes(id) && !refused.includes(id))
  if (changed.length === 0) return ignored([...(rest.length > 0 ? [`nothing to change on ${rest.join(', ')}`] : []), ...refusedPart(refused)].join('; '))
  const verb = { suspend: `suspended (${reasonOf(intent)})`, reinstate: 'reinstated', end: `set to expire at ${endOf(intent)}`, revoke: 'revoked (refunded)' }[intent.kind]
  return done([`${verb}: ${changed.join(', ')}`, ...refusedPart(refused)].join('; '), changed, hashes)
}

const reasonOf = (i: Lifecycle) => ('reason' in i ? i.reason : '')
const endOf = (i: Lifecycle) => (i.kind === 'end' ? i.at.toISOString() : '')
