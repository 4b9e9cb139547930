// Idempotency-Key on create routes: the first response is stored (24 h) and replayed for the same key
// and body; a different body is 409. A key whose first request is still running is 409 too.
// The stored response is written by the create's own transaction (`RecordCreated`), so the resource and
// its replay commit together: a node that dies right after the commit leaves a key that replays, never
// one that a retry could run a second time. A key left unfinished (its request died before committing
// anything) is taken back after 60 s.
// A first response may hold a secret shown once (API token, key value): given the SECRET_KEY, the stored
// copy is sealed, so the replay can show it again while a database dump cannot.
import { open, seal, sha256Hex } from '../infra/crypto'
import type { Sql, Tx } from '../infra/db'
import { AppError, invalid } from '../core/errors'
import type { RecordCreated } from '../infra/record-created'
import { statusOf } from './errors'

const TTL_SQL = `interval '24 hours'`
const ABANDONED_AFTER_S = 60

export interface Outcome {
  status: number
  body: unknown
}

export type { RecordCreated }

export const recordNothing: RecordCreated = async (_tx, body) => body

/** Stores an outcome under this request's claim; false when the claim is no longer ours or is finished. */
type RecordOutcome = (sql: Sql | Tx, outcome: Outcome) => Promise<boolean>

export async function idempotent(
  sql: Sql,
  accountId: string,
  idemKey: string | null | undefined,
  route: string,
  body: unknown,
  run: (record: RecordOutcome | null) => Promise<Outcome & { recorded?: boolean }>,
  secretKey?: Uint8Array,
): Promise<Outcome & { replayed: boolean }> {
  const store = (response: unknown) => sql.json((secretKey ? { __sealed: seal(secretKey, JSON.stringify(response)) } : response) as never)
  if (idemKey === null || idemKey === undefined) return { ...(await run(null)), replayed: false }
  if (idemKey.length < 1 || idemKey.length > 255) throw invalid('header.idempotency-key', 'must be 1..255 characters')
  const requestHash = sha256Hex(`${route}\n${canonicalJson(body ?? null)}`)
  // The claim is the row's created_at (as text, to the microsecond): a request that was taken back as
  // abandoned can no longer record its outcome over the one that took it.
  const [claimed] = await sql<{ claim: string }[]>`insert into idempotency_keys (account_id, idem_key, request_hash)
    values (${accountId}, ${idemKey}, ${requestHash})
    on conflict (account_id, idem_key) do update
      set request_hash = excluded.request_hash, created_at = now(), status_code = null, response = null
      where idempotency_keys.created_at < now() - ${sql.unsafe(TTL_SQL)}
         or (idempotency_keys.status_code is null and idempotency_keys.request_hash = excluded.request_hash
             and idempotency_keys.created_at < now() - make_interval(secs => ${ABANDONED_AFTER_S}))
    returning created_at::text as claim`
  if (!claimed) return replay(sql, accountId, idemKey, requestHash, secretKey)

  const { claim } = claimed
  const record: RecordOutcome = async (db, outcome) =>
    (
      await db`update idempotency_keys set status_code = ${outcome.status}, response = ${store(outcome.body)}
        where account_id = ${accountId} and idem_key = ${idemKey} and status_code is null and created_at = ${claim}::text::timestamptz
        returning 1`
    ).length === 1
  let outcome: Outcome & { recorded?: boolean }
  try {
    outcome = await run(record)
  } catch (err) {
    if (err instanceof AppError && statusOf(err) < 500) {
      await record(sql, { status: statusOf(err), body: { __problem: { code: err.code, detail: err.detail, extra: err.extra } } })
    } else {
      // Not a final answer: let the client retry with the same key. A create that did commit has
      // recorded its response with it (status_code is set), and that stays.
      await sql`delete from idempotency_keys
        where account_id = ${accountId} and idem_key = ${idemKey} and status_code is null and created_at = ${claim}::text::timestamptz`.catch(() => {})
    }
    throw err
  }
  // A create that did not record in its transaction (none today) is finalised here, after its commit.
  if (!outcome.recorded) await record(sql, outcome)
  return { status: outcome.status, body: outcome.body, replayed: false }
}

async function replay(sql: Sql, accountId: string, idemKey: string, requestHash: string, secretKey?: Uint8Array) {
  const [prev] = await sql<{ request_hash: string; status_code: number | null; response: unknown }[]>`
    select request_hash, status_code, response from idempotency_keys
    where account_id = ${accountId} and idem_key = ${idemKey}`
  if (!prev || prev.request_hash !== requestHash) {
    throw new AppError('idempotency_key_reused', 'This Idempotency-Key was used with a different request')
  }
  if (prev.status_code === null) {
    throw new AppError('idempotency_key_reused', 'A request with this Idempotency-Key is still in progress')
  }
  const sealed = (prev.response as { __sealed?: string } | null)?.__sealed
  if (sealed !== undefined && !secretKey) throw new Error('a sealed idempotent response needs the secret key')
  const replayBody = sealed !== undefined ? JSON.parse(open(secretKey!, sealed).toString('utf8')) : prev.response
  return { status: prev.status_code, body: replayBody, replayed: true }
}

/** JSON with object keys sorted, so the same body sent with its fields in another order is the same request. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null'
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`
}

/** A stored refusal is replayed as the same problem (with this request's id). */
export function storedProblem(body: unknown): AppError | null {
  const p = (body as { __problem?: { code: AppError['code']; detail: string; extra: AppError['extra'] } } | null)?.__problem
  return p ? new AppError(p.code, p.detail, p.extra) : null
}

type SetLike = { status?: number | string; headers: Record<string, string | number> }

/**
 * Runs a create under the request's Idempotency-Key and writes the (replayed) answer. `run` gets the
 * `RecordCreated` to call inside its transaction (see above).
 */
export async function createOnce(
  ctx: { set: SetLike; headers: Record<string, string | undefined>; body: unknown },
  sql: Sql,
  accountId: string,
  route: string,
  run: (record: RecordCreated) => Promise<unknown>,
  options: { secretKey?: Uint8Array } = {},
): Promise<unknown> {
  const outcome = await idempotent(
    sql,
    accountId,
    ctx.headers['idempotency-key'],
    route,
    ctx.body,
    async (record) => {
      let recorded = false
      const recordCreated: RecordCreated = !record
        ? recordNothing
        : async (tx, body) => {
            // false: this claim was taken back meanwhile (the request ran past the abandonment window)
            if (!(await record(tx, { status: 201, body }))) throw new AppError('idempotency_key_reused', 'A request with this Idempotency-Key is still in progress')
            recorded = true
            return body
          }
      const body = await run(recordCreated)
      return { status: 201, body, recorded }
    },
    options.secretKey,
  )
  if (outcome.replayed) ctx.set.headers['idempotent-replayed'] = 'true'
  const refusal = storedProblem(outcome.body)
  if (refusal) throw refusal
  ctx.set.status = outcome.status
  return outcome.body
}
