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

/**
 * Reads a response body: whole when it is announced short (the text only when `max` > 0), else at
 * most `max` bytes and the rest dropped. `res.body` is touched only on the second path: asking for the
 * stream makes Bun build one, which costs more than the rest of reading a short answer.
 */
async function snippet(res: Response, max: number): Promise<string> {
  const length = Number(res.headers.get('content-length') ?? NaN)
  if (length <= READ_WHOLE) {
    const bytes = await res.arrayBuffer()
    return max === 0 ? '' : clean(new TextDecoder().decode(new Uint8Array(bytes).subarray(0, max)))
  }
  if (!res.body) return ''
  const reader = res.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    while (size < Math.max(max, 1)) {
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

const TIMED_OUT = 'timeout'
const STOPPED = 'stopped'

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
  let headers = msg.headers
  if (address !== null) {
    const pinned = new URL(url.href)
    pinned.hostname = address.includes(':') ? `[${address}]` : address
    fetchUrl = pinned.href
    headers = { ...msg.headers, host: url.host }
    if (url.protocol === 'https:') tls = { serverName: url.hostname }
  }

  // One controller, a timer and a listener: AbortSignal.timeout joined with the shutdown signal by
  // AbortSignal.any cost about a third of the request itself.
  const ctl = new AbortController()
  const timer = setTimeout(() => ctl.abort(TIMED_OUT), opts.timeoutMs)
  const stop = () => ctl.abort(STOPPED)
  const shutdown = opts.signal
  if (shutdown?.aborted) stop()
  else shutdown?.addEventListener('abort', stop)
  try {
    const res = await fetch(fetchUrl, { method: 'POST', headers, body: msg.body, redirect: 'manual', signal: ctl.signal, tls })
    const ok = res.status >= 200 && res.status < 300
    const text = await snippet(res, ok ? 0 : MAX_BODY_SNIPPET).catch(() => '')
    if (ok) return done(res.status, null)
    if (res.status >= 300 && res.status < 400) return done(res.status, `HTTP ${res.status}: redirect not followed`)
    return done(res.status, `HTTP ${res.status}${text ? `: ${text}` : ''}`)
  } catch (err) {
    if (ctl.signal.reason === TIMED_OUT) return done(null, `timed out after ${opts.timeoutMs} ms`)
    if (ctl.signal.reason === STOPPED) return done(null, 'aborted: node shutting down')
    const e = err as { code?: string; message?: string }
    return done(null, [e.code, e.message].filter(Boolean).join(': ') || 'request failed')
  } finally {
    clearTimeout(timer)
    shutdown?.removeEventListener('abort', stop)
  }
}
