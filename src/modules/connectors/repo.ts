import type { JSONValue } from 'postgres'
import type { Sql, Tx } from '../../infra/db'
import { newId } from '../../infra/crypto'
import { iso } from '../../core/values'
import type { Connector, MailAttempt, Mapping, Outcome, Provider, ReceivedEvent } from './model'

interface Row {
  id: string
  provider: Provider
  name: string
  mappings: Mapping[]
  email_keys: boolean
  created_at: Date
  updated_at: Date
}

const toConnector = (r: Row): Connector => ({
  id: r.id,
  provider: r.provider,
  name: r.name,
  mappings: r.mappings,
  email_keys: r.email_keys,
  endpoint_path: `/hooks/${r.id}`,
  created_at: iso(r.created_at)!,
  updated_at: iso(r.updated_at)!,
})

export async function insertConnector(
  tx: Tx,
  c: { id: string; accountId: string; provider: Provider; name: string; secretSealed: string; mappings: Mapping[]; emailKeys: boolean },
): Promise<Connector> {
  const [row] = await tx<Row[]>`insert into connectors (id, account_id, provider, name, secret_sealed, mappings, email_keys)
    values (${c.id}, ${c.accountId}, ${c.provider}, ${c.name}, ${c.secretSealed}, ${tx.json(c.mappings as unknown as JSONValue)}, ${c.emailKeys})
    returning id, provider, name, mappings, email_keys, created_at, updated_at`
  return toConnector(row!)
}

export async function findConnector(sql: Sql | Tx, accountId: string, id: string): Promise<Connector | null> {
  const [row] = await sql<Row[]>`select id, provider, name, mappings, email_keys, created_at, updated_at
    from connectors where id = ${id} and account_id = ${accountId}`
  return row ? toConnector(row) : null
}

export async function listConnectors(sql: Sql, accountId: string): Promise<Connector[]> {
  const rows = await sql<Row[]>`select id, provider, name, mappings, email_keys, created_at, updated_at
    from connectors where account_id = ${accountId} order by created_at, id`
  return rows.map(toConnector)
}

/** What the inbound endpoint needs: any account's connector, by id, with its sealed secret. */
export async function findForHook(sql: Sql | Tx, id: string) {
  const [row] = await sql<(Row & { account_id: string; secret_sealed: string })[]>`
    select id, account_id, provider, name, secret_sealed, mappings, email_keys, created_at, updated_at from connectors where id = ${id}`
  return row ? { ...toConnector(row), accountId: row.account_id, secretSealed: row.secret_sealed } : null
}

export async function updateConnector(
  tx: Tx,
  accountId: string,
  id: string,
  c: { name?: string; secretSealed?: string; mappings?: Mapping[]; emailKeys?: boolean },
): Promise<Connector | null> {
  const [row] = await tx<Row[]>`update connectors set
      name = coalesce(${c.name ?? null}, name),
      secret_sealed = coalesce(${c.secretSealed ?? null}, secret_sealed),
      mappings = coalesce(${c.mappings === undefined ? null : tx.json(c.mappings as unknown as JSONValue)}::jsonb, mappings),
      email_keys = coalesce(${c.emailKeys ?? null}::boolean, email_keys),
      updated_at = now()
    where id = ${id} and account_id = ${accountId}
    returning id, provider, name, mappings, email_keys, created_at, updated_at`
  return row ? toConnector(row) : null
}

export async function deleteConnector(sql: Sql, accountId: string, id: string): Promise<boolean> {
  const rows = await sql`delete from connectors where id = ${id} and account_id = ${accountId} returning id`
  return rows.length > 0
}

/**
 * Claims a provider event for this transaction: false when it is already claimed (a replay, or a
 * concurrent redelivery that committed first; one still in flight makes this wait for it).
 */
export async function claimEvent(tx: Tx, connectorId: string, providerEventId: string, type: string): Promise<string | null> {
  const id = newId('cev')
  const rows = await tx`insert into connector_events (id, connector_id, provider_event_id, type, outcome)
    values (${id}, ${connectorId}, ${providerEventId}, ${type}, 'processed')
    on conflict (connector_id, provider_event_id) do nothing returning id`
  return rows.length > 0 ? id : null
}

export async function settleEvent(tx: Tx, id: string, outcome: Outcome, detail: string, keyIds: string[]): Promise<void> {
  await tx`update connector_events set outcome = ${outcome}, detail = ${detail}, key_ids = ${keyIds} where id = ${id}`
}

/** A refused event, shown on the connector but not claimed; at most the last 50 refusals are kept. */
export async function recordRefusal(sql: Sql, connectorId: string, type: string | null, outcome: Outcome, detail: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`insert into connector_events (id, connector_id, type, outcome, detail)
      values (${newId('cev')}, ${connectorId}, ${type}, ${outcome}, ${detail})`
    await tx`delete from connector_events where connector_id = ${connectorId} and provider_event_id is null and id not in (
      select id from connector_events where connector_id = ${connectorId} and provider_event_id is null order by received_at desc, id desc limit 50)`
  })
}

export async function recentEvents(sql: Sql, connectorId: string): Promise<ReceivedEvent[]> {
  const rows = await sql<(Omit<ReceivedEvent, 'received_at'> & { received_at: Date })[]>`
    select id, provider_event_id, type, outcome, detail, key_ids, received_at from connector_events
    where connector_id = ${connectorId} order by received_at desc, id desc limit 50`
  return rows.map((r) => ({ ...r, received_at: iso(r.received_at)! }))
}

export async function recentMails(sql: Sql, connectorId: string): Promise<MailAttempt[]> {
  const rows = await sql<
    { id: string; key_id: string; to_email: string; status: MailAttempt['status']; attempts: number; last_error: string | null; next_attempt_at: Date; created_at: Date; sent_at: Date | null }[]
  >`select id, key_id, to_email, status, attempts, last_error, next_attempt_at, created_at, sent_at from connector_mails
    where connector_id = ${connectorId} order by created_at desc, id desc limit 50`
  return rows.map((r) => ({
    id: r.id,
    key_id: r.key_id,
    to: r.to_email,
    status: r.status,
    attempts: r.attempts,
    last_error: r.last_error,
    next_attempt_at: r.status === 'pending' ? iso(r.next_attempt_at) : null,
    created_at: iso(r.created_at)!,
    sent_at: iso(r.sent_at),
  }))
}

/** Keys a provider object produced, for this connector. */
export async function keysOfRefs(tx: Tx, connectorId: string, refs: string[]): Promise<string[]> {
  if (refs.length === 0) return []
  const rows = await tx<{ key_id: string }[]>`select distinct key_id from connector_keys
    where connector_id = ${connectorId} and ref in ${tx(refs)} order by key_id`
  return rows.map((r) => r.key_id)
}

export async function linkKey(tx: Tx, connectorId: string, refs: string[], keyId: string): Promise<void> {
  for (const ref of new Set(refs)) {
    await tx`insert into connector_keys (connector_id, ref, key_id) values (${connectorId}, ${ref}, ${keyId}) on conflict do nothing`
  }
}

/** Serialises the transactions about one provider object (a subscription's first events may race). */
export async function lockRef(tx: Tx, connectorId: string, ref: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${`${connectorId}:${ref}`}, 0))`
}

export async function queueMail(tx: Tx, m: { connectorId: string; accountId: string; keyId: string; to: string; valueSealed: string }) {
  await tx`insert into connector_mails (id, connector_id, account_id, key_id, to_email, value_sealed)
    values (${newId('mail')}, ${m.connectorId}, ${m.accountId}, ${m.keyId}, ${m.to}, ${m.valueSealed})`
}
