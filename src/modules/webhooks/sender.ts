// One HTTP attempt of a signed message. Never throws: every outcome (2xx, other status, refused
// target, timeout, connection error) comes back as a value to be logged.
import { resolveTarget } from './ssrf'
import type { SignedMessage } from './signer'

export interface AttemptOutcome {
  statusCode: number | null
  success: boolean
  durationMs: number
  /** Bounded (MAX_ERROR chars); null on success. */
  error: string | null
}

export const MAX_ERROR = 500
const MAX_BODY_SNIPPET = 200

/** At most MAX_ERROR characters, NUL replaced (Postgres text cannot hold it; a receiver's body may). */
const bound = (raw: string) => {
  const text = raw.replaceAll('\u0000', '\ufffd')
  return text.length > MAX_ERROR ? `${text.slice(0, MAX_ERROR - 1)}…` : text
}

/** Bodies announced at most this long are read whole (one call, the connection stays reusable). */
const READ_WHOLE = 64 * 1024

/** Reads at most `max` bytes of a response body, then drops the rest. */
async function snippet(res: Response, max: number): Promise<string> {
  if (!res.body) return ''
  const length = Number(res.headers.get('content-length') ?? NaN)
  if (length <= READ_WHOLE) return clean(new TextDecoder().decode(new Uint8Array(await res.arrayBuffer()).subarray(0, max)))
  const reader = res.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    while (size < max) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      size += value.byteLength
    }
  } finally {
    if (size >= max) await reader.cancel().catch(() => {})
    reader.releaseLock()
  }
  return clean(new TextDecoder().decode(Buffer.concat(chunks).subarray(0, max)))
}

const clean = (text: string) => text.replace(/\s+/g, ' ').trim()

export interface SendOptions {
  allowPrivate: boolean
  timeoutMs: number
  /** Aborts the attempt early (node shutdown). */
  signal?: AbortSignal
}

export async function send(urlText: string, msg: SignedMessage, opts: SendOptions): Promise<AttemptOutcome> {
  const t0 = performance.now()
  const done = (statusCode: number | null, error: string | null): AttemptOutcome => ({
    statusCode,
    success: error === null,
    durationMs: Math.max(0, Math.round(performance.now() - t0)),
    error: error === null ? null : bound(error),
  })

  const target = await resolveTarget(urlText, opts.allowPrivate)
  if (!target.ok) return done(null, `refused: url ${target.reason}`)

  // Connect to the address that was checked, not to whatever a second DNS answer says; Host and TLS
  // server name stay those of the URL, so virtual hosts and certificates work as usual.
  const { url, address } = target
  let fetchUrl = url.href
  let tls: { serverName: string } | undefined
  const headers = { ...msg.headers }
  if (address !== null) {
    const pinned = new URL(url.href)
    pinned.hostname = address.includes(':') ? `[${address}]` : address
    fetchUrl = pinned.href
    headers.host = url.host
    if (url.protocol === 'https:') tls = { serverName: url.hostname }
  }

  const timeout = AbortSignal.timeout(opts.timeoutMs)
  const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout
  try {
    const res = await fetch(fetchUrl, { method: 'POST', headers, body: msg.body, redirect: 'manual', signal, tls })
    const text = await snippet(res, MAX_BODY_SNIPPET).catch(() => '')
    if (res.status >= 200 && res.status < 300) return done(res.status, null)
    if (res.status >= 300 && res.status < 400) return done(res.status, `HTTP ${res.status}: redirect not followed`)
    return done(res.status, `HTTP ${res.status}${text ? `: ${text}` : ''}`)
  } catch (err) {
    if (timeout.aborted) return done(null, `timed out after ${opts.timeoutMs} ms`)
    if (opts.signal?.aborted) return done(null, 'aborted: node shutting down')
    const e = err as { code?: string; message?: string }
    return done(null, [e.code, e.message].filter(Boolean).join(': ') || 'request failed')
  }
}
