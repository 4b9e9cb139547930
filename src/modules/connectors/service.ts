import type { Deps } from '../../deps'
import { isId, newId, open, seal } from '../../infra/crypto'
import { invalid, notFound, foundById } from '../../core/errors'
import type { Principal } from '../../core/principal'
import { applyIntent, Unmapped, type Applied } from './apply'
import { hookGateOf } from './hook-gate'
import { BadSignature, Malformed, type ReadEvent } from './intents'
import type { Connector, ConnectorDetail, CreateConnectorBody, HookAnswer, Mapping, PatchConnectorBody, Provider } from './model'
import { readLemonSqueezy, verifyLemonSqueezy } from './providers/lemonsqueezy'
import { readPaddle, verifyPaddle } from './providers/paddle'
import { readStripe, verifyStripe } from './providers/stripe'
import * as repo from './repo'

/** Mail is on when the server has somewhere to send it from and to. */
export const mailEnabled = (deps: Deps) => deps.config.smtpUrl !== null && deps.config.mailFrom !== null

async function checkMappings(deps: Deps, who: Principal, mappings: Mapping[]): Promise<Mapping[]> {
  const seen = new Set<string>()
  for (const [i, m] of mappings.entries()) {
    if (seen.has(m.price)) throw invalid(`body.mappings.${i}.price`, `maps ${m.price} a second time`)
    seen.add(m.price)
    const [policy] = isId('pol', m.policy_id)
      ? await deps.sql`select id from policies where id = ${m.policy_id} and account_id = ${who.accountId}`
      : []
    if (!policy) throw invalid(`body.mappings.${i}.policy_id`, `is not a policy of this account (${m.policy_id})`)
  }
  return mappings.map((m) => ({ price: m.price, policy_id: m.policy_id }))
}

export async function createConnector(deps: Deps, who: Principal, input: CreateConnectorBody): Promise<Connector> {
  const mappings = await checkMappings(deps, who, input.mappings ?? [])
  const created = await deps.sql.begin((tx) =>
    repo.insertConnector(tx, {
      id: newId('con'),
      accountId: who.accountId,
      provider: input.provider,
      name: input.name,
      secretSealed: seal(deps.secretKey, input.signing_secret),
      mappings,
      emailKeys: input.email_keys ?? false,
    }),
  )
  hookGateOf(deps).created(created.id) // its hooks are answered from the first call on this node (hook-gate.ts)
  return created
}

export const listConnectors = (deps: Deps, who: Principal) => repo.listConnectors(deps.sql, who.accountId)

export async function getConnector(deps: Deps, who: Principal, id: string): Promise<ConnectorDetail> {
  const connector = await foundById('con', 'connector', id, () => repo.findConnector(deps.sql, who.accountId, id))
  const [events, emails] = await Promise.all([repo.recentEvents(deps.sql, id), repo.recentMails(deps.sql, id)])
  return { ...connector, mail_enabled: mailEnabled(deps), events, emails }
}

export async function updateConnector(deps: Deps, who: Principal, id: string, input: PatchConnectorBody): Promise<Connector> {
  if (!isId('con', id)) throw notFound('connector', id)
  const mappings = input.mappings === undefined ? undefined : await checkMappings(deps, who, input.mappings)
  const updated = await deps.sql.begin((tx) =>
    repo.updateConnector(tx, who.accountId, id, {
      name: input.name,
      secretSealed: input.signing_secret === undefined ? undefined : seal(deps.secretKey, input.signing_secret),
      mappings,
      emailKeys: input.email_keys,
    }),
  )
  if (!updated) throw notFound('connector', id)
  return updated
}

/** The keys it issued stay; their links to provider objects go (later provider events find nothing). */
export async function deleteConnector(deps: Deps, who: Principal, id: string): Promise<void> {
  if (!isId('con', id) || !(await repo.deleteConnector(deps.sql, who.accountId, id))) throw notFound('connector', id)
  hookGateOf(deps).forget(id)
}

/**
 * The one answer to an unknown connector id and to a missing, wrong or stale signature: the same
 * status and body, so the door says nothing about which ids exist. Why a signature failed is on the
 * connector's events (GET /v1/connectors/:id), which only its account reads.
 */
const notVerified = () => invalid('signature', 'does not verify for this endpoint')

async function readEvent(provider: Provider, raw: Buffer, headers: Headers, secret: string): Promise<ReadEvent> {
  switch (provider) {
    case 'stripe':
      return readStripe(await verifyStripe(raw, headers, secret))
    case 'paddle':
      return readPaddle(await verifyPaddle(raw, headers, secret))
    case 'lemonsqueezy':
      return readLemonSqueezy(verifyLemonSqueezy(raw, headers, secret), headers)
  }
}

/**
 * `POST /hooks/:connector_id`: verify, claim the provider event in the inbox, act on it, all in one
 * transaction. A replay (or a concurrent redelivery that committed first) changes nothing. Refusals
 * (bad signature, malformed, unmapped) are shown on the connector and not claimed.
 */
export async function receiveHook(
  deps: Deps,
  connectorId: string,
  body: Uint8Array,
  headers: Headers,
  address: string | null,
  wakeMailer: () => void,
): Promise<HookAnswer> {
  // Rates, then the known ids, before Postgres; an unknown id and a bad signature answer alike (hook-gate.ts)
  const gate = hookGateOf(deps)
  const now = Date.now()
  const wellFormed = isId('con', connectorId)
  gate.admit(connectorId, wellFormed, address, now)
  const connector = wellFormed && (await gate.known(connectorId, now)) ? await repo.findForHook(deps.sql, connectorId) : null
  if (!connector) {
    gate.forget(connectorId)
    gate.unknown()
    throw notVerified()
  }
  const raw = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  let read: ReadEvent
  try {
    read = await readEvent(connector.provider, raw, headers, open(deps.secretKey, connector.secretSealed).toString('utf8'))
  } catch (err) {
    if (err instanceof BadSignature) {
      // counted, and written for the console at most once a minute per connector (hook-gate.ts)
      if (gate.badSignature(connector.id, now)) await repo.recordRefusal(deps.sql, connector.id, null, 'bad_signature', err.message)
      throw notVerified()
    }
    if (err instanceof Malformed) {
      await repo.recordRefusal(deps.sql, connector.id, null, 'malformed', err.message)
      throw invalid('body', `is not a ${connector.provider} event Keyward can read: ${err.message}`)
    }
    throw err
  }
  const ctx = { accountId: connector.accountId, connector, secretKey: deps.secretKey, mailEnabled: mailEnabled(deps) }
  let applied: Applied | null
  try {
    applied = await deps.sql.begin(async (tx) => {
      const claimed = await repo.claimEvent(tx, connector.id, read.id, read.type)
      if (!claimed) return null
      const result = await applyIntent(tx, ctx, read.intent)
      await repo.settleEvent(tx, claimed, result.outcome, result.detail, result.keyIds)
      return result
    })
  } catch (err) {
    if (!(err instanceof Unmapped)) throw err
    await repo.recordRefusal(deps.sql, connector.id, read.type, 'unmapped', `${read.id}: ${err.message}`)
    return { received: true, outcome: 'unmapped', detail: err.message }
  }
  if (applied === null) return { received: true, outcome: 'duplicate', detail: `${read.id} was already received; nothing changed` }
  // every node forgets the keys' cached state before the provider hears back
  if (applied.hashes.length > 0) await deps.bus.publish({ kind: 'keys', keyHashes: applied.hashes })
  if (applied.keyIds.length > 0 && ctx.mailEnabled && connector.email_keys) wakeMailer()
  return { received: true, outcome: applied.outcome, detail: applied.detail }
}

