// The client's HTTP side: one signed POST with a fresh nonce per attempt, a timeout covering the body,
// retries with backoff for network errors and 503, the 429 wait, and the answer's signature verified
// against the exact request bytes sent (docs/api.md, "Signed answers") with a key the pinned root vouches
// for (signing-keys.ts). Whatever the status, only a verified answer's content is believed: an unsigned
// or forged one is a SignatureError. Also the one GET the client makes: the key set.
import { fromUtf8, parseJsonText, randomBytes, toBase64Url } from './encoding.js'
import { KeywardError, RateLimitedError, SignatureError, UnreachableError } from './errors.js'
import { requestDigest, verifyAnswer, type SignedAnswer } from './signature.js'
import type { Trust } from './signing-keys.js'

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>

export interface TransportOptions {
  baseUrl: string
  token: string
  /** Where answers' signers are looked up; its key set is refreshed (at most daily) beside each call. */
  trust: () => Trust
  fetch: FetchLike
  timeoutMs: number
  retries: number
  backoffMs: number
  waitOnRateLimit: boolean | number
  now: () => number
  sleep: (ms: number) => Promise<void>
}

/** A verified 2xx answer: its parsed body and the signed record (kept for grace). */
export interface Answer {
  status: number
  json: unknown
  signed: SignedAnswer
  requestId: string | null
}

export class Transport {
  constructor(private readonly o: TransportOptions) {}

  /** One signed POST with retries, timeouts and 429 handling; the answer's signature verified. */
  async call(path: string, body: unknown): Promise<Answer> {
    const o = this.o
    const trust = o.trust()
    // The daily key set refresh (never failing the call) comes first: one request at a time, and the
    // answer is then checked against a set at most a day old.
    await trust.refreshIfDue()
    const resolve = (kid: string, certificate: string | null) => trust.keyFor(kid, certificate, 'online')
    const request = JSON.stringify(body)
    const requestSha256 = await requestDigest(request)
    for (let attempt = 0; ; attempt++) {
      const nonce = toBase64Url(randomBytes(24))
      let res: Response
      let bytes: Uint8Array
      try {
        ;({ res, bytes } = await this.post(path, request, nonce))
      } catch (cause) {
        if (attempt < o.retries) {
          await this.backoff(attempt)
          continue
        }
        throw new UnreachableError({ detail: `no answer from ${o.baseUrl}${path}: ${describe(cause)}`, cause })
      }
      const status = res.status
      const requestId = res.headers.get('x-request-id')
      const certificate = res.headers.get('keyward-certificate')
      const verify = (checkTime = true) =>
        verifyAnswer(resolve, { header: res.headers.get('keyward-signature'), certificate, path, nonce, requestSha256, body: bytes, status, now: o.now(), requestId, checkTime })
      if (status === 401) {
        // The service cannot sign a 401 (it does not know whose key to sign with): the code is the
        // status's own, never the body's, and the caller treats it as unverified (grace may stand in).
        throw new KeywardError({ code: 'unauthorized', status, detail: 'the service did not accept the token (an unsigned 401, which may also be forged)', requestId })
      }
      if (status >= 500) {
        // 5xx: the service, or a gateway in front of it, is unavailable. A 503 is retried like a network error.
        if (status === 503 && attempt < o.retries) {
          await this.backoff(attempt)
          continue
        }
        await verify(false)
        const problem = parseJson(bytes)
        throw new UnreachableError({ status, detail: problem?.detail ?? `HTTP ${status}`, requestId, signed: true })
      }
      const verified = await verify()
      if (status >= 400) {
        const problem = parseJson(bytes) ?? {}
        const init = {
          status,
          detail: typeof problem.detail === 'string' ? problem.detail : `HTTP ${status}`,
          requestId: problem.request_id ?? requestId,
          retryAfter: retryAfterOf(problem, res),
          signed: true,
        }
        if (status === 429) {
          const wait = init.retryAfter ?? 1
          const allowed = o.waitOnRateLimit === true ? Infinity : typeof o.waitOnRateLimit === 'number' ? o.waitOnRateLimit : -1
          if (wait <= allowed) {
            await o.sleep(wait * 1000)
            attempt = -1 // a rate-limit wait is not a failure: the retry budget starts again
            continue
          }
          throw new RateLimitedError(init)
        }
        throw new KeywardError({ code: typeof problem.code === 'string' ? problem.code : `http_${status}`, ...init })
      }
      const text = fromUtf8(bytes)
      const json = parseJsonText(text)
      if (json === null) throw new SignatureError('the signed answer is not JSON', requestId, status)
      const header = res.headers.get('keyward-signature')!
      const signed: SignedAnswer = { path, nonce, t: verified.t, kid: verified.kid, sig: sigOf(header), request, body: text }
      if (certificate !== null) signed.certificate = certificate
      return { status, json, requestId, signed }
    }
  }

  /** GET of a JSON document (the key set), one attempt under the timeout; rejects unless a 200 with JSON. */
  async getJson(path: string): Promise<unknown> {
    const o = this.o
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new Error(`timed out after ${o.timeoutMs} ms`)), o.timeoutMs)
    try {
      const res = await o.fetch(o.baseUrl + path, { method: 'GET', headers: { authorization: `Bearer ${o.token}` }, signal: controller.signal })
      const text = await res.text()
      if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${path}`)
      const json = parseJsonText(text)
      if (json === null) throw new Error(`${path} did not answer JSON`)
      return json
    } finally {
      clearTimeout(timer)
    }
  }

  private async post(path: string, payload: string, nonce: string): Promise<{ res: Response; bytes: Uint8Array }> {
    const o = this.o
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new Error(`timed out after ${o.timeoutMs} ms`)), o.timeoutMs)
    try {
      const res = await o.fetch(o.baseUrl + path, {
        method: 'POST',
        headers: { authorization: `Bearer ${o.token}`, 'content-type': 'application/json', 'keyward-nonce': nonce },
        body: payload,
        signal: controller.signal,
      })
      // The body is read under the same timeout: a server that stalls mid-answer is unreachable too.
      return { res, bytes: new Uint8Array(await res.arrayBuffer()) }
    } finally {
      clearTimeout(timer)
    }
  }

  private backoff(attempt: number): Promise<void> {
    const ceiling = Math.min(30_000, this.o.backoffMs * 2 ** attempt)
    return this.o.sleep(Math.random() * ceiling) // full jitter: clients that failed together do not retry together
  }
}

const parseJson = (bytes: Uint8Array) => parseJsonText(fromUtf8(bytes))

function retryAfterOf(problem: any, res: Response): number | null {
  if (Number.isFinite(problem?.retry_after)) return problem.retry_after
  const header = Number(res.headers.get('retry-after'))
  return res.headers.get('retry-after') !== null && Number.isFinite(header) ? header : null
}

const sigOf = (header: string) => /(?:^|,)\s*sig=([^,\s]+)/.exec(header)?.[1] ?? ''
const describe = (err: unknown) => (err instanceof Error ? err.message : String(err))
