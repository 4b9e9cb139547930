// Idempotency-Key on create routes: the first response is stored (24 h) and replayed for the same key
// and body; a different body is 409. A key whose first request is still running is 409 too.
// A first response may hold a secret shown once (API token, key value): given the SECRET_KEY, the stored
// copy is sealed, so the replay can show it again while a database dump cannot.
import { open, seal, sha256Hex } from '../infra/crypto'
import type { Sql } from '../infra/db'
import { AppError, invalid } from '../core/errors'
import { statusOf } from './errors'

const TTL_SQL = `interval '24 hours'`
const ABANDONED_AFTER_S = 60

export interface Outcome {
  status: number
  body: unknown
}

export async function idempotent(
  sql: Sql,
  accountId: string,
  idemKey: string | null | undefined,
  route: string,
  body: unknown,
  run: () => Promise<Outcome>,
  secretKey?: Uint8Array,
): Promise<Outcome & { replayed: boolean }> {
  const store = (response: unknown) => sql.json((secretKey ? { __sealed: seal(secretKey, JSON.stringify(response)) } : response) as never)
  if (idemKey === null || idemKey === undefined) return { ...(await run()), replayed: false }
  if (idemKey.length < 1 || idemKey.length > 255) throw invalid('header.idempotency-key', 'must be 1..255 characters')
  const requestHash = sha256Hex(`${route}\n${canonicalJson(body ?? null)}`)
  const [claimed] = await sql`insert into idempotency_keys (account_id, idem_key, request_hash)
    values (${accountId}, ${idemKey}, ${requestHash})
    on conflict (account_id, idem_key) do update set request_hash = excluded.request_hash, created_at = now()
      where idempotency_keys.created_at < now() - ${sql.unsafe(TTL_SQL)}
         or (idempotency_keys.status_code is null and idempotency_keys.request_hash = excluded.request_hash
             and idempotency_keys.created_at < now() - make_interval(secs => ${ABANDONED_AFTER_S}))
    returning 1`
  if (!claimed) {
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
  let outcome: Outcome
  try {
    outcome = await run()
  } catch (err) {
    if (err instanceof AppError && statusOf(err) < 500) {
      outcome = { status: statusOf(err), body: { __problem: { code: err.code, detail: err.detail, extra: err.extra } } }
      await sql`update idempotency_keys set status_code = ${outcome.status}, response = ${store(outcome.body)}
        where account_id = ${accountId} and idem_key = ${idemKey}`
    } else {
      // not a final answer: let the client retry with the same key
      await sql`delete from idempotency_keys where account_id = ${accountId} and idem_key = ${idemKey}`.catch(() => {})
    }
    throw err
  }
  await sql`update idempotency_keys set status_code = ${outcome.status}, response = ${store(outcome.body)}
    where account_id = ${accountId} and idem_key = ${idemKey}`
  return { ...outcome, replayed: false }
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

/** Runs a create handler under the request's Idempotency-Key and writes the (replayed) answer. */
export async function createOnce(
  ctx: { set: SetLike; headers: Record<string, string | undefined>; body: unknown },
  sql: Sql,
  accountId: string,
  route: string,
  run: () => Promise<unknown>,
  options: { secretKey?: Uint8Array } = {},
): Promise<unknown> {
  const outcome = await idempotent(
    sql,
    accountId,
    ctx.headers['idempotency-key'],
    route,
    ctx.body,
    async () => ({ status: 201, body: await run() }),
    options.secretKey,
  )
  if (outcome.replayed) ctx.set.headers['idempotent-replayed'] = 'true'
  const refusal = storedProblem(outcome.body)
  if (refusal) throw refusal
  ctx.set.status = outcome.status
  return outcome.body
}
