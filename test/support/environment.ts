// What a test file needs from the machine (real Postgres, NATS, Redis, a redis-server binary, Chromium),
// checked in one place. Present: the file's tests run. Missing outside CI: they skip, and one console
// line says which file skipped and why. Missing under CI (`CI` set, as `.ci/run` sets it): one failing
// test in that file names what is missing, so a CI without its services cannot come out green on
// skipped tests. Call at the top of a test file: `const ready = await requireEnvironment('cluster/x', ['postgres', 'nats', 'redis'])`,
// then `describe.if(ready)(...)`.
import { existsSync } from 'node:fs'
import { connect } from 'node:net'
import { test } from 'bun:test'

export type Need = 'postgres' | 'nats' | 'redis' | 'redis-server' | 'chromium'

export const CHROMIUM = '/usr/bin/chromium'

/** Whether this run is CI, where a missing environment is a failure (`CI=true`, `CI=1`; not `CI=false`). */
export const underCi = (env: Record<string, string | undefined> = process.env) => !!env.CI && !/^(false|0|no)$/i.test(env.CI)

const SERVICES = {
  postgres: { variable: 'DATABASE_URL', port: 5432 },
  nats: { variable: 'NATS_URL', port: 4222 },
  redis: { variable: 'REDIS_URL', port: 6379 },
} as const

/** Whether something accepts TCP connections at `host:port` within `ms`. */
function reachable(host: string, port: number, ms = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port })
    const done = (ok: boolean) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(ok)
    }
    const timer = setTimeout(() => done(false), ms)
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

/** Why `need` is not met, or null when it is. */
async function missing(need: Need): Promise<string | null> {
  if (need === 'chromium') return existsSync(CHROMIUM) ? null : `${CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)`
  if (need === 'redis-server') {
    return Bun.spawnSync(['sh', '-c', 'command -v redis-server'], { stdout: 'ignore', stderr: 'ignore' }).exitCode === 0
      ? null
      : 'redis-server is not installed'
  }
  const { variable, port } = SERVICES[need]
  const value = process.env[variable]
  if (!value) return `${variable} is not set`
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return `${variable} is not a URL`
  }
  const host = url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1'
  const at = Number(url.port || port)
  return (await reachable(host, at)) ? null : `${variable} (${host}:${at}) is not reachable`
}

/**
 * Whether every one of `needs` is met for the test file `file` (a name for the messages). When one is
 * not: outside CI, a console line and false (the caller skips); under CI, a failing test naming it, and false.
 */
export async function requireEnvironment(file: string, needs: Need[]): Promise<boolean> {
  const reasons = (await Promise.all(needs.map(missing))).filter((r): r is string => r !== null)
  if (reasons.length === 0) return true
  const why = reasons.join('; ')
  if (underCi()) {
    test(`${file}: its environment is present (CI)`, () => {
      throw new Error(`${file} needs ${needs.join(', ')}: ${why}`)
    })
  } else {
    console.warn(`${file}: skipped, ${why}`)
  }
  return false
}

/** The three services a multi-node test runs against (README.md, Tests). */
export const requireCluster = (file: string) => requireEnvironment(file, ['postgres', 'nats', 'redis'])

/** Debian's Chromium for the browser tests. */
export const requireChromium = (file: string) => requireEnvironment(file, ['chromium'])
