// A local webhook receiver for tests: verifies every delivery with the `standardwebhooks` package, as a
// real receiver would, records it, and answers with a status chosen per path and per request number.
import { Webhook } from 'standardwebhooks'

export interface Received {
  path: string
  /** 1-based count of requests to this path, this one included. */
  n: number
  headers: Record<string, string>
  body: string
  /** The verified, parsed payload; null when verification failed. */
  payload: { id: string; type: string; timestamp: string; data: any } | null
  error: string | null
  at: number
  /** The client port it came from: one per connection, so requests sharing it shared a connection. */
  peer: number
}

type Answer = number | ((n: number) => number | Promise<number>)

export interface Receiver {
  port: number
  url(path: string): string
  /** The secret deliveries to `path` must be signed with. */
  expect(path: string, secret: string, answer?: Answer): void
  received: Received[]
  on(path: string): Received[]
  waitFor(pred: (all: Received[]) => boolean, timeoutMs?: number, what?: string): Promise<void>
  stop(): Promise<void>
}

export function startReceiver(port = 0): Receiver {
  const secrets = new Map<string, string>()
  const answers = new Map<string, Answer>()
  const counts = new Map<string, number>()
  const received: Received[] = []
  const server = Bun.serve({
    port,
    hostname: '127.0.0.1',
    async fetch(req) {
      const path = new URL(req.url).pathname
      const peer = server.requestIP(req)?.port ?? 0
      const body = await req.text()
      const headers: Record<string, string> = {}
      req.headers.forEach((v, k) => (headers[k] = v))
      const n = (counts.get(path) ?? 0) + 1
      counts.set(path, n)
      let payload: Received['payload'] = null
      let error: string | null = null
      const secret = secrets.get(path)
      try {
        if (!secret) throw new Error(`no secret registered for ${path}`)
        payload = new Webhook(secret).verify(body, headers) as Received['payload']
      } catch (err) {
        error = String(err)
      }
      received.push({ path, n, headers, body, payload, error, at: performance.now(), peer })
      const answer = answers.get(path) ?? 200
      const status = typeof answer === 'number' ? answer : await answer(n)
      return new Response(status === 200 ? 'ok' : `status ${status}`, { status })
    },
  })
  return {
    port: server.port!,
    url: (path) => `http://127.0.0.1:${server.port}${path}`,
    expect(path, secret, answer = 200) {
      secrets.set(path, secret)
      answers.set(path, answer)
    },
    received,
    on: (path) => received.filter((r) => r.path === path),
    async waitFor(pred, timeoutMs = 10_000, what = 'deliveries') {
      const until = Date.now() + timeoutMs
      while (!pred(received)) {
        if (Date.now() > until) throw new Error(`timed out waiting for ${what} (${received.length} received)`)
        await Bun.sleep(10)
      }
    },
    async stop() {
      await server.stop(true)
    },
  }
}

/** Polls `fn` until it returns a truthy value. */
export async function eventually<T>(fn: () => Promise<T | null | undefined | false>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const until = Date.now() + timeoutMs
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(20)
  }
}
