// `keyward relay <command> --data <dir>` (and the `keyward-relay` executable, which is this file's
// `runRelay` alone): request, load, serve. docs/integrating.md, "Floating seats on your customer's network".
import { parseArgs } from 'node:util'
import { createHash, randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { loadRelayConfig, type RelayConfig } from '../../config'
import { normalizeKeyValue, IMPORTED_VALUE_RE } from '../../infra/crypto'
import { createLogger } from '../../infra/log'
import { kidOfRaw, rawPublicKey } from '../signing/keys'
import { checkIn, startCheckIns } from './check-in'
import { machineIdentity } from './identity'
import { LeasePool } from './pool'
import { notFound, relayRoutes } from './server'
import { RelayStore } from './store'
import { publicKeyOf, readRelayLicense, relayRequestCode, RelayLicenseError, splitLicenseFile, type RelayLicense } from './text'

export const RELAY_USAGE = `Usage:
  keyward relay request --data DIR [--name NAME]       print this relay's request code (KWRLY1.…); makes its key pair on first use
  keyward relay load FILE --data DIR [--key VALUE] [--root PUBLIC_KEY]
                                                       install a relay license (the key value and the account's root public
                                                       key are needed on the first load; later loads keep them)
  keyward relay serve --data DIR [--port PORT] [--host HOST]
                                                       serve the floating seats (prints the admin token on first start)
Environment: UPSTREAM_URL (check-in), CHECK_IN_SECONDS (default 300, at least 1), KEYWARD_MACHINE_ID (a container's identity)`

export class RelayUsageError extends Error {}

interface Opened {
  store: RelayStore
  config: Readonly<RelayConfig>
}

function open(data: string | undefined): Opened {
  if (!data) throw new RelayUsageError('--data DIR is required (the relay keeps its key, license and leases there)')
  return { store: RelayStore.open(data), config: loadRelayConfig() }
}

function requestCodeOf(o: Opened, name?: string): string {
  const pair = o.store.keyPair()
  const id = machineIdentity(o.config.machineId)
  const stored = o.store.meta('name')
  const chosen = name ?? stored ?? hostname().slice(0, 100) ?? 'relay'
  if (name !== undefined) o.store.setMetas({ name })
  return relayRequestCode({ v: 1, relay_public_key: pair.publicKeyB64url, device_fingerprint: id.fingerprint, components: id.components, name: chosen || 'relay' })
}

/** Verifies a license for this relay against the pinned root (throws RelayLicenseError). */
function verifier(o: Opened) {
  return (text: string, certificate: string | null): RelayLicense => {
    const root = o.store.meta('root_public_key')
    if (!root) throw new RelayLicenseError('untrusted', "the account's root public key is not pinned yet: load with --root")
    const key = publicKeyOf(root)!
    const pair = o.store.keyPair()
    return readRelayLicense(text, {
      root: key,
      rootKid: kidOfRaw(rawPublicKey(key)),
      relayPublicKey: pair.publicKeyB64url,
      deviceFingerprint: machineIdentity(o.config.machineId).fingerprint,
      now: Date.now(),
      certificate,
    })
  }
}

/** `relay load`: pins the root (first load), checks the key value's form, verifies and installs. */
export function loadLicense(o: Opened, fileText: string, opts: { key?: string; root?: string }, pool?: LeasePool): RelayLicense {
  if (opts.root !== undefined) {
    const key = publicKeyOf(opts.root)
    if (!key) throw new RelayUsageError('--root must be the account\'s root public key (public_key of GET /v1/offline/public-key: base64 of 32 bytes, or its PEM)')
    const raw = rawPublicKey(key).toString('base64')
    const pinned = o.store.meta('root_public_key')
    if (pinned && pinned !== raw) throw new RelayUsageError('--root differs from the root pinned by an earlier load: this relay serves one account')
    if (!pinned) o.store.setMetas({ root_public_key: raw })
  }
  if (opts.key !== undefined && normalizeKeyValue(opts.key) === null && !IMPORTED_VALUE_RE.test(opts.key.trim())) throw new RelayUsageError('--key must be the license key value')
  if (opts.key === undefined && !o.store.meta('key_hash')) throw new RelayUsageError('--key VALUE is required on the first load (the key whose seats this relay floats)')
  const { license, certificate } = splitLicenseFile(fileText)
  const verified = verifier(o)(license, certificate)
  const current = pool?.license ?? null
  const target = pool ?? new LeasePool(o.store)
  target.install(verified, opts.key)
  void current
  return verified
}

async function request(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { data: { type: 'string' }, name: { type: 'string' } } })
  if (values.name !== undefined && (values.name.length < 1 || values.name.length > 100)) throw new RelayUsageError('--name must be 1..100 characters')
  const o = open(values.data)
  try {
    console.log(requestCodeOf(o, values.name))
  } finally {
    o.store.close()
  }
  return 0
}

async function load(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { data: { type: 'string' }, key: { type: 'string' }, root: { type: 'string' } } })
  const file = positionals[0]
  if (!file || positionals.length > 1) throw new RelayUsageError('load takes one FILE (the relay license)')
  const source = Bun.file(file)
  if (!(await source.exists())) throw new RelayUsageError(`${file}: no such file`)
  if (source.size > 64 * 1024) throw new RelayUsageError(`${file} is too large to be a relay license`)
  const o = open(values.data)
  try {
    const l = loadLicense(o, await source.text(), { key: values.key, root: values.root })
    const p = l.payload
    console.log(`loaded: relay ${p.relay_id}, key ${p.key_id}, ${p.seats} seats, leases of ${p.lease_seconds} s, until ${p.expires_at}`)
  } catch (err) {
    if (err instanceof RelayLicenseError) throw new RelayUsageError(`refused: ${err.message}`)
    throw err
  } finally {
    o.store.close()
  }
  return 0
}

async function serve(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { data: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' } } })
  const port = values.port === undefined ? 8787 : Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RelayUsageError('--port must be 0..65535')
  const o = open(values.data)
  const claim = o.store.claim()
  if ('heldBy' in claim) {
    o.store.close()
    throw new RelayUsageError(`another relay (pid ${claim.heldBy}) serves ${values.data}: one relay per data folder`)
  }
  const log = createLogger('info', 2)
  const pool = new LeasePool(o.store)
  const keyPair = o.store.keyPair()
  let tokenHash = o.store.meta('admin_token_sha256')
  if (!tokenHash) {
    const token = randomBytes(24).toString('base64url')
    tokenHash = createHash('sha256').update(token).digest('hex')
    o.store.setMetas({ admin_token_sha256: tokenHash })
    console.log(`admin token: ${token}`)
  }
  const verify = verifier(o)
  const checkIns = o.config.upstreamUrl === null
    ? null
    : startCheckIns({ pool, upstreamUrl: o.config.upstreamUrl, privateKey: keyPair.privateKey, verify, log }, o.config.checkInSeconds)
  const routes = relayRoutes({
    pool,
    keyPair,
    log,
    adminTokenHash: tokenHash,
    requestCode: requestCodeOf(o),
    load: (text, key) => loadLicense(o, text, { key }, pool),
    checkInNow: checkIns === null ? null : () => checkIn({ pool, upstreamUrl: o.config.upstreamUrl!, privateKey: keyPair.privateKey, verify, log }),
    upstreamUrl: o.config.upstreamUrl,
  })
  const server = Bun.serve({ port, hostname: values.host ?? '0.0.0.0', routes, fetch: notFound, development: false })
  const sweeper = setInterval(() => pool.sweep(), 1000)
  const l = pool.license?.payload
  console.log(`relay listening on http://${server.hostname}:${server.port} (${l ? `relay ${l.relay_id}, ${l.seats} seats` : 'no license loaded yet'})`)
  await new Promise<void>((resolve) => {
    const stop = () => resolve()
    process.once('SIGINT', stop)
    process.once('SIGTERM', stop)
  })
  clearInterval(sweeper)
  checkIns?.stop()
  await server.stop()
  o.store.close()
  claim.release()
  return 0
}

const COMMANDS: Record<string, (args: string[]) => Promise<number>> = { request, load, serve }

/** Runs `relay <command> ...`; returns the exit code (2 for a usage error or a refused license). */
export async function runRelay(argv: string[]): Promise<number> {
  const run = argv[0] === undefined ? undefined : COMMANDS[argv[0]]
  if (!run) {
    console.error(RELAY_USAGE)
    return argv[0] ? 2 : 0
  }
  try {
    return await run(argv.slice(1))
  } catch (err) {
    const parse = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')
    if (!(err instanceof RelayUsageError) && !parse && (err as Error).name !== 'ConfigError') throw err
    console.error((err as Error).message)
    return 2
  }
}
