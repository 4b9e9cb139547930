// The console's only door to the node: the public REST API, with the token of the signed-in session.
// The token lives in sessionStorage (gone when the tab closes), never in a URL or a cookie.
// The shapes of the API's answers are the server's own models, imported as types only (nothing of the
// server is bundled): see the pages' `import type … from '../../../modules/…/model'`.
import type { Problem as ProblemDocument } from '../../http/schema'

type ProblemFields = typeof ProblemDocument.static
export type FieldError = NonNullable<ProblemFields['errors']>[number]
/**
 * A problem document as the console reads it: the API's (RFC 9457), or one the console makes itself
 * (network down, a field it checks before asking), which has no type, title or request id.
 */
export type Problem = Pick<ProblemFields, 'status' | 'code' | 'detail'> &
  Partial<Pick<ProblemFields, 'type' | 'title' | 'request_id' | 'errors' | 'retry_after' | 'rows'>>

export class ApiError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail)
  }
}

export type Mode = 'account' | 'operator'
export interface Session {
  token: string
  mode: Mode
  accountId: string | null
  /** The account's name, shown in the top bar (absent in a session saved before it was kept). */
  accountName?: string
}

const KEY = 'keyward.console.session'

export function loadSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(KEY)
    return raw ? (JSON.parse(raw) as Session) : null
  } catch {
    return null
  }
}

export function saveSession(s: Session | null) {
  if (s) sessionStorage.setItem(KEY, JSON.stringify(s))
  else sessionStorage.removeItem(KEY)
}

/** Called when the node stops accepting the token (revoked, rotated): the app goes back to sign-in. */
let onUnauthorized: (p: Problem) => void = () => {}
export function setUnauthorizedHandler(fn: (p: Problem) => void) {
  onUnauthorized = fn
}

async function toProblem(res: Response): Promise<Problem> {
  try {
    const body = await res.json()
    if (body && typeof body.detail === 'string') return { status: res.status, ...body }
  } catch {}
  return { status: res.status, code: 'http_' + res.status, detail: `The server answered ${res.status} ${res.statusText}` }
}

declare const apiPathBrand: unique symbol
/** A path on the node, built by `apiPath` (a page cannot hand a plain string to `request`). */
export type ApiPath = string & { readonly [apiPathBrand]: true }

/**
 * An API path whose interpolated values are each one encoded path segment:
 * `apiPath\`/v1/keys/${id}/revoke\``. A value that would still be read as something else than a
 * segment (empty, `.` or `..`, which URL parsing resolves away) is refused, not sent.
 */
export function apiPath(parts: TemplateStringsArray, ...segments: string[]): ApiPath {
  let out = parts[0]!
  segments.forEach((segment, i) => {
    if (segment === '' || segment === '.' || segment === '..') throw new Error(`not a path segment: "${segment}"`)
    out += encodeURIComponent(segment) + parts[i + 1]!
  })
  return out as ApiPath
}

type Params = Record<string, string | number | undefined | null>

/** Query string from the defined values only (`?a=1`, or empty). */
export function qs(params: Params) {
  const u = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, String(v))
  const s = u.toString()
  return s ? `?${s}` : ''
}

/** The path with a query string of the defined values only. */
export const withQuery = (path: ApiPath, params: Params) => (path + qs(params)) as ApiPath

/** The answer to a request, or the ApiError of its problem (a 401 of the session's token signs out). */
async function send(method: string, path: ApiPath, init: { body?: string; type?: string; token?: string }): Promise<Response> {
  const auth = init.token ?? loadSession()?.token
  const headers: Record<string, string> = {}
  if (auth) headers.authorization = `Bearer ${auth}`
  if (init.type) headers['content-type'] = init.type
  let res: Response
  try {
    res = await fetch(path, { method, headers, body: init.body })
  } catch {
    throw new ApiError({ status: 0, code: 'network', detail: 'The node could not be reached. Check your connection and try again.' })
  }
  if (!res.ok) {
    const p = await toProblem(res)
    if (res.status === 401 && init.token === undefined) onUnauthorized(p)
    throw new ApiError(p)
  }
  return res
}

export async function request<T>(method: string, path: ApiPath, body?: unknown, token?: string): Promise<T> {
  const res = await send(method, path, body === undefined ? { token } : { body: JSON.stringify(body), type: 'application/json', token })
  if (res.status === 204) return undefined as T
  return (await res.json()) as T
}

/** POST of a file's text as it is (the key import: CSV, NDJSON or JSON). */
export async function postText<T>(path: ApiPath, text: string, type: string): Promise<T> {
  return (await (await send('POST', path, { body: text, type })).json()) as T
}

/** Downloads an answer as a file (the key export): the token goes in a header, so not a plain link. */
export async function download(path: ApiPath, filename: string): Promise<void> {
  const blob = await (await send('GET', path, {})).blob()
  const url = URL.createObjectURL(blob)
  const a = document.createElement('a')
  a.href = url
  a.download = filename
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

export const get = <T>(path: ApiPath) => request<T>('GET', path)
export const post = <T>(path: ApiPath, body?: unknown) => request<T>('POST', path, body ?? {})
export const put = <T>(path: ApiPath, body: unknown) => request<T>('PUT', path, body)
export const patch = <T>(path: ApiPath, body: unknown) => request<T>('PATCH', path, body)
export const del = <T>(path: ApiPath) => request<T>('DELETE', path)

/**
 * Which kind of token this is: an API key answers /v1/ping; the operator token is accepted by the
 * operator routes (an unknown account id is then a 404, not a 401).
 */
export async function identify(token: string): Promise<Session> {
  try {
    const ping = await request<{ accountId: string; accountName?: string }>('GET', apiPath`/v1/ping`, undefined, token)
    return { token, mode: 'account', accountId: ping.accountId, ...(ping.accountName ? { accountName: ping.accountName } : {}) }
  } catch (err) {
    if (!(err instanceof ApiError) || err.problem.status !== 401) throw err
  }
  // With no ADMIN_TOKEN configured the operator routes do not exist (404 for any token): a wrong token
  // must be refused (401) before a 404 for the real one can mean "operator".
  const probe = apiPath`/admin/accounts/acct_console_probe`
  const enabled = await request('GET', probe, undefined, 'not-a-token').catch((e) => e instanceof ApiError && e.problem.status === 401)
  if (enabled === true) try {
    await request('GET', probe, undefined, token)
  } catch (err) {
    if (err instanceof ApiError && err.problem.status === 404 && err.problem.code === 'not_found') {
      return { token, mode: 'operator', accountId: null }
    }
    if (err instanceof ApiError && err.problem.status !== 401) throw err
  }
  throw new ApiError({ status: 401, code: 'unauthorized', detail: 'This token is not accepted by this node: check that you copied it whole.' })
}
