// The one path parser of the HTTP layer: where a request's path starts in `request.url`, the path
// itself (`requestPath`) and the form routes are looked up by (`routePath`: no trailing slash).
//
// Elysia finds a request's path at a fixed offset into `request.url` (the first "/" from index 11,
// i.e. after "http://" and a host of at least four characters). Bun builds that URL from the Host
// header, and from the request target alone when Host is empty or not a valid host. So `Host: x`
// with `GET /ab/v1/products` would route as `/v1/products`, past any proxy rule on the path. Here
// every request Elysia sees gets a URL whose path starts where Elysia looks; Bun's own router (the
// validate fast path, Elysia's routes mounted in `serve.routes`) already matches on the real path.
// The usual URL (a host of four characters or more) is passed through untouched, with no allocation.

/** Where the URL's path starts: Bun gives an absolute URL, or the request target alone; -1 when it has none. */
export function pathStart(url: string): number {
  if (url.charCodeAt(0) === 47 /* "/" */) return 0
  const scheme = url.indexOf('://')
  return scheme === -1 ? -1 : url.indexOf('/', scheme + 3)
}

/** `http://h/v1/x/?q` → `/v1/x/`: the path as sent, without the query. */
export function requestPath(url: string): string {
  const start = pathStart(url)
  if (start === -1) return '/'
  const q = url.indexOf('?', start)
  return q === -1 ? url.slice(start) : url.slice(start, q)
}

/** `http://h/v1/x/?q` → `/v1/x`: the path a route is looked up by (routing accepts both slash forms). */
export function routePath(url: string): string {
  const path = requestPath(url)
  return path.length > 1 && path.charCodeAt(path.length - 1) === 47 ? path.slice(0, -1) : path
}

/** Elysia's offset (see its `composeGeneralHandler`): a path starting there or later is found right. */
const FRAMEWORK_PATH_OFFSET = 11

/** The host written into a rewritten URL; the request's own Host header is left as sent. */
const PLACEHOLDER_ORIGIN = 'http://host.invalid'

/** The request with a URL Elysia reads the path of correctly (the same object when it already does). */
export function withParsablePath(request: Request): Request {
  const url = request.url
  const start = pathStart(url)
  if (start >= FRAMEWORK_PATH_OFFSET) return request
  const rewritten = new Request(PLACEHOLDER_ORIGIN + (start === -1 ? '/' : url.slice(start)), request)
  // Bun's router put the matched route's parameters on the original; Elysia reads them from there.
  const params = (request as { params?: unknown }).params
  if (params !== undefined) (rewritten as { params?: unknown }).params = params
  return rewritten
}

type Handler = (request: Request) => unknown

/**
 * For `app.wrap(...)`: Elysia calls it as `hoc(handler, request)(request)` ahead of its path parsing,
 * on the general handler and on every route it mounts in Bun's router. Hands back the handler itself
 * for the usual URL, so that case costs one `indexOf` and no allocation.
 */
export function routeOnParsedPath(handler: Handler, request: Request): Handler {
  const parsable = withParsablePath(request)
  return parsable === request ? handler : () => handler(parsable)
}
