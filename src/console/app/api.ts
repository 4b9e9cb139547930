// The console's only door to the node: the public REST API, with the token of the signed-in session.
// The token lives in sessionStorage (gone when the tab closes), never in a URL or a cookie.

export interface FieldError {
  field: string
  message: string
}
export interface Problem {
  status: number
  code: string
  title?: string
  detail: string
  errors?: FieldError[]
}

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

export async function request<T>(method: string, path: string, body?: unknown, token?: string): Promise<T> {
  const auth = token ?? loadSession()?.token
  const headers: Record<string, string> = {}
  if (auth) headers.authorization = `Bearer ${auth}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  let res: Response
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  } catch {
    throw new ApiError({ status: 0, code: 'network', detail: 'The node could not be reached. Check your connection and try again.' })
  }
  if (!res.ok) {
    const p = await toProblem(res)
    if (res.status === 401 && token === undefined) onUnauthorized(p)
    throw new ApiError(p)
  }
  if (res.status === 204) return undefined as T
  return (await res.json()) as T
}

export const get = <T>(path: string) => request<T>('GET', path)
export const post = <T>(path: string, body?: unknown) => request<T>('POST', path, body ?? {})
export const put = <T>(path: string, body: unknown) => request<T>('PUT', path, body)
export const patch = <T>(path: string, body: unknown) => request<T>('PATCH', path, body)
export const del = <T>(path: string) => request<T>('DELETE', path)

/** Query string from the defined values only. */
export function qs(params: Record<string, string | number | undefined | null>) {
  const u = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, String(v))
  const s = u.toString()
  return s ? `?${s}` : ''
}

/**
 * Which kind of token this is: an API key answers /v1/ping; the operator token is accepted by the
 * operator routes (an unknown account id is then a 404, not a 401).
 */
export async function identify(token: string): Promise<Session> {
  try {
    const ping = await request<{ accountId: string }>('GET', '/v1/ping', undefined, token)
    return { token, mode: 'account', accountId: ping.accountId }
  } catch (err) {
    if (!(err instanceof ApiError) || err.problem.status !== 401) throw err
  }
  // With no ADMIN_TOKEN configured the operator routes do not exist (404 for any token): a wrong token
  // must be refused (401) before a 404 for the real one can mean "operator".
  const probe = '/admin/accounts/acct_console_probe'
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
