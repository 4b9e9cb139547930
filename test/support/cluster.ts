// Multi-node tests: real `bun src/main.ts` processes on a fresh Postgres database, the machine's NATS
// and Redis (optionally each node behind its own TCP proxy, so a test can cut one node's connection).
import { join } from 'node:path'
import postgres from 'postgres'
import { ADMIN_TOKEN, SECRET_KEY, client, createAccount, freshDatabase, newProduct, type Client, type TestDb } from './harness'
import { startPrivateNats, type PrivateNats } from './nats-server'
import { startTcpProxy, type TcpProxy } from './tcp-proxy'

/** For the benchmark programs (test/bench/); a test file asks `requireCluster` (environment.ts), which also checks the services answer. */
export const clusterMode = !!(process.env.DATABASE_URL && process.env.NATS_URL && process.env.REDIS_URL)

const MAIN = join(import.meta.dir, '..', '..', 'src', 'main.ts')

export interface NodeProcess {
  url: string
  call: Client
  proc: Bun.Subprocess<'ignore', 'pipe', 'pipe'>
  /** This node's own NATS / Redis proxies (when started with `proxies: true`). */
  nats: TcpProxy | null
  redis: TcpProxy | null
  output(): string
  /** SIGTERM (or `signal`) and wait for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

export interface Cluster {
  db: TestDb
  nodes: NodeProcess[]
  call: Client
  /** A small pool on the nodes' database (opened on first use, ended by `close`). */
  readonly sql: postgres.Sql
  /** The private NATS server the nodes use (`privateNats: true`); stopped by `close`. */
  readonly nats: PrivateNats
  account(plan?: string): Promise<{ id: string; token: string }>
  /** A growth account and one product in it: what most multi-node tests start from. */
  tenant(): Promise<{ accountId: string; token: string; productId: string }>
  /** Stops the nodes, ends `sql`, stops the private NATS, drops the database. */
  close(): Promise<void>
}

function hostPort(url: string, defaultPort: number) {
  const u = new URL(url)
  return { host: u.hostname, port: Number(u.port || defaultPort) }
}

/** Reads a child's stream into a bounded buffer (a full pipe would block the child) and finds its URL. */
function collect(stream: ReadableStream<Uint8Array>, sink: { text: string }, onLine: (line: string) => void) {
  void (async () => {
    const dec = new TextDecoder()
    let partial = ''
    for await (const chunk of stream) {
      const text = dec.decode(chunk, { stream: true })
      sink.text = (sink.text + text).slice(-20_000)
      partial += text
      const lines = partial.split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) onLine(line)
    }
  })().catch(() => {})
}

export async function startNodeProcess(
  dbUrl: string,
  opts: { env?: Record<string, string>; proxies?: boolean; timeoutMs?: number; natsUrl?: string; root?: string } = {},
): Promise<NodeProcess> {
  let nats: TcpProxy | null = null
  let redis: TcpProxy | null = null
  let natsUrl = opts.natsUrl ?? process.env.NATS_URL!
  let redisUrl = process.env.REDIS_URL!
  if (opts.proxies) {
    const n = hostPort(natsUrl, 4222)
    const r = hostPort(redisUrl, 6379)
    nats = await startTcpProxy(n.host, n.port)
    redis = await startTcpProxy(r.host, r.port)
    natsUrl = nats.url('nats')
    redisUrl = redis.url('redis')
  }
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    DATABASE_URL: dbUrl,
    NATS_URL: natsUrl,
    REDIS_URL: redisUrl,
    SECRET_KEY,
    ADMIN_TOKEN,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    DEMO_ACCOUNT: 'false',
    ...opts.env,
  }
  // `root`: another checkout's node (a bench comparing commits in one run)
  const main = opts.root ? join(opts.root, 'src/main.ts') : MAIN
  const proc = Bun.spawn([process.execPath, main], { env, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
  const out = { text: '' }
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`node did not start in time:\n${out.text}`)), opts.timeoutMs ?? 30_000)
    const onLine = (line: string) => {
      const m = /Keyward listening on (http:\/\/\S+)/.exec(line)
      if (m) {
        clearTimeout(timer)
        resolve(m[1]!)
      }
    }
    collect(proc.stdout, out, onLine)
    collect(proc.stderr, out, () => {})
    proc.exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`node exited (${code}) before listening:\n${out.text}`))
    })
  })
  let stopped: Promise<number | null> | null = null
  return {
    url,
    call: client(url),
    proc,
    nats,
    redis,
    output: () => out.text,
    stop(signal = 'SIGTERM') {
      stopped ??= (async () => {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
        const killer = setTimeout(() => proc.kill('SIGKILL'), 20_000)
        const code = await proc.exited
        clearTimeout(killer)
        nats?.close()
        redis?.close()
        return code
      })()
      return stopped
    },
  }
}

/**
 * `n` nodes on one fresh database, the preamble every multi-node file shares (one `beforeAll` starts
 * it, one `afterAll` calls `close`). The first node starts alone (it applies the migrations).
 * `privateNats`: the nodes use a NATS server of their own (`c.nats`), which a test may stop and restart.
 */
export async function startCluster(
  n: number,
  opts: { env?: Record<string, string>; proxies?: boolean; privateNats?: boolean } = {},
): Promise<Cluster> {
  const nats = opts.privateNats ? await startPrivateNats() : null
  const db = await freshDatabase()
  const nodes: NodeProcess[] = []
  const nodeOpts = { ...opts, ...(nats ? { natsUrl: nats.url } : {}) }
  try {
    nodes.push(await startNodeProcess(db.url!, nodeOpts))
    nodes.push(...(await Promise.all(Array.from({ length: n - 1 }, () => startNodeProcess(db.url!, nodeOpts)))))
  } catch (err) {
    await Promise.all(nodes.map((node) => node.stop('SIGKILL')))
    await db.drop()
    await nats?.stop()
    throw err
  }
  // Every node has heard every other's heartbeat before a test relies on acks.
  await Bun.sleep(600)
  const call = nodes[0]!.call
  let sql: postgres.Sql | null = null
  const account = (plan = 'growth') => createAccount(call, plan, `Cluster ${plan}`)
  return {
    db,
    nodes,
    call,
    get sql() {
      return (sql ??= postgres(db.url!, { max: 2, onnotice: () => {} }))
    },
    get nats() {
      if (!nats) throw new Error('this cluster uses the shared NATS server (start it with privateNats: true)')
      return nats
    },
    account,
    async tenant() {
      const { id: accountId, token } = await account('growth')
      return { accountId, token, productId: (await newProduct(call, token)).id }
    },
    async close() {
      await Promise.all(nodes.map((node) => node.stop()))
      await sql?.end({ timeout: 5 })
      await nats?.stop()
      await db.drop()
    },
  }
}

export const fingerprint = (i: number, salt = Math.random().toString(16).slice(2, 10)) =>
  (salt + i.toString(16).padStart(8, '0')).padEnd(64, '0').slice(0, 64)

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function pool<T, R>(items: T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++
        results[i] = await fn(items[i]!, i)
      }
    }),
  )
  return results
}
