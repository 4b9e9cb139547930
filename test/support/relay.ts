// Relay licenses and certificates made exactly as the contract writes them (docs/integrating.md,
// "Floating seats on your customer's network"), with node:crypto alone: a test account's root (and, when
// asked, a signing key the root certified) signs a relay license for a request code, so the relay is
// tested before and apart from the cloud side that issues them (the formats as docs/api.md, "Relays",
// writes them: the relay certificate in the envelope's relay_certificate, relay_public_key in standard base64). Also: the relay as a subprocess.
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const ROOT_DIR = join(import.meta.dir, '..', '..')
const rawOf = (k: KeyObject) => Buffer.from(k.export({ format: 'jwk' }).x!, 'base64url')
const kidOf = (raw: Buffer) => createHash('sha256').update(raw).digest('hex').slice(0, 32)
const b64url = (s: string) => Buffer.from(s, 'utf8').toString('base64url')
const signText = (key: KeyObject, text: string) => `${text}.${sign(null, Buffer.from(text, 'ascii'), key).toString('base64url')}`

export interface TestSigner {
  kid: string
  privateKey: KeyObject
  publicKey: KeyObject
  /** base64 of the raw 32 bytes (as GET /v1/offline/public-key) */
  publicKeyB64: string
  /** KWCERT1 by the root; null for the root itself */
  certificate: string | null
}

export interface TestAccount {
  accountId: string
  root: TestSigner
  /** A signing key certified by the root. */
  signingKey(): TestSigner
}

export function testAccount(accountId = `acct_${'0'.repeat(20)}RELAY1`): TestAccount {
  const pair = () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519')
    const raw = rawOf(publicKey)
    return { privateKey, publicKey, raw, kid: kidOf(raw) }
  }
  const r = pair()
  const root: TestSigner = { kid: r.kid, privateKey: r.privateKey, publicKey: r.publicKey, publicKeyB64: r.raw.toString('base64'), certificate: null }
  return {
    accountId,
    root,
    signingKey() {
      const s = pair()
      const payload = { kid: s.kid, public_key: s.raw.toString('base64'), account_id: accountId, created_at: new Date().toISOString() }
      const certificate = signText(r.privateKey, `KWCERT1.${b64url(JSON.stringify(payload))}`)
      return { kid: s.kid, privateKey: s.privateKey, publicKey: s.publicKey, publicKeyB64: s.raw.toString('base64'), certificate }
    },
  }
}

export function decodeRequest(code: string): { v: 1; relay_public_key: string; device_fingerprint: string; components: Record<string, string>; name: string } {
  const [prefix, body] = code.trim().split('.')
  if (prefix !== 'KWRLY1') throw new Error(`not a relay request code: ${code}`)
  return JSON.parse(Buffer.from(body!, 'base64url').toString('utf8'))
}

export interface IssueOptions {
  signer?: TestSigner
  relayId?: string
  keyId?: string
  productId?: string
  seats?: number
  leaseSeconds?: number
  expiresAt?: string
  keyExpiresAt?: string | null
  entitlements?: Record<string, true | number | string>
  /** Overrides for the payload (to forge one). */
  payload?: Record<string, unknown>
  /** Where the relay certificate travels: in the envelope (default) or beside the license (JSON file). */
  certificateIn?: 'envelope' | 'beside'
}

/** A relay license (and its relay certificate) for `requestCode`, signed by `signer` (default: the root). */
export function issueRelayLicense(account: TestAccount, requestCode: string, o: IssueOptions = {}): { text: string; file: string; relayId: string; relayCertificate: string } {
  const req = decodeRequest(requestCode)
  const signer = o.signer ?? account.root
  const now = Date.now()
  const relayId = o.relayId ?? `rly_${'0'.repeat(20)}${Math.random().toString(36).slice(2, 8).toUpperCase().padEnd(6, '0')}`
  const expiresAt = o.expiresAt ?? new Date(now + 30 * 86_400_000).toISOString()
  const keyId = o.keyId ?? 'key_01JRELAYTESTKEY000000000000'
  const seats = o.seats ?? 2
  const payload = {
    v: 2, kind: 'relay', id: `lic_${relayId.slice(4)}`, relay_id: relayId, account_id: account.accountId, key_id: keyId,
    product_id: o.productId ?? 'prod_01JRELAYTESTPRODUCT0000000', plan: 'team', entitlements: o.entitlements ?? { cad: true, seats_max: 10 },
    seats, lease_seconds: o.leaseSeconds ?? 900, relay_public_key: Buffer.from(req.relay_public_key, 'base64url').toString('base64'), device_fingerprint: req.device_fingerprint,
    key_expires_at: o.keyExpiresAt === undefined ? null : o.keyExpiresAt, issued_at: new Date(now).toISOString(), expires_at: expiresAt, kid: signer.kid,
    ...o.payload,
  }
  const relayCertPayload = {
    kid: relayId, public_key: Buffer.from(req.relay_public_key, 'base64url').toString('base64'), account_id: account.accountId,
    created_at: new Date(now).toISOString(), scope: { relay_id: relayId, key_id: keyId, seats, expires_at: expiresAt },
  }
  const relayCertificate = signText(signer.privateKey, `KWCERT1.${b64url(JSON.stringify(relayCertPayload))}`)
  const enc = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64')
  const sig = sign(null, Buffer.from('license/' + enc, 'utf8'), signer.privateKey).toString('base64')
  const inEnvelope = (o.certificateIn ?? 'envelope') === 'envelope'
  const envelope: Record<string, unknown> = { enc, sig, alg: 'base64+ed25519', kid: signer.kid }
  if (signer.certificate) envelope.certificate = signer.certificate
  if (inEnvelope) envelope.relay_certificate = relayCertificate
  const body = Buffer.from(JSON.stringify(envelope), 'utf8').toString('base64')
  const text = `-----BEGIN KEYWARD LICENSE-----\n${body.match(/.{1,64}/g)!.join('\n')}\n-----END KEYWARD LICENSE-----\n`
  const file = inEnvelope ? text : JSON.stringify({ relay_id: relayId, relay_license: text, relay_certificate: relayCertificate })
  return { text, file, relayId, relayCertificate }
}

export const KEY_VALUE = 'RE1AY-TESTK-EYVA1-0E000-00001'

/** `bun run keyward relay …` (or the compiled binary) on a data folder, with its environment. */
export async function relayCli(args: string[], env: Record<string, string> = {}, bin: string[] = ['bun', 'src/cli.ts']) {
  const proc = Bun.spawn([...bin, 'relay', ...args], { cwd: ROOT_DIR, env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', ...env }, stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, stdout, stderr }
}

export const tempDir = (prefix: string) => mkdtempSync(join(tmpdir(), prefix))

export function writeTemp(dir: string, name: string, text: string): string {
  const file = join(dir, name)
  writeFileSync(file, text)
  return file
}

export interface RunningRelay {
  url: string
  adminToken: string | null
  proc: ReturnType<typeof Bun.spawn>
  stop(signal?: number | NodeJS.Signals): Promise<void>
}

/** Starts `relay serve` on a free port and waits for it to listen. */
export async function startRelay(data: string, env: Record<string, string> = {}, bin: string[] = ['bun', 'src/cli.ts']): Promise<RunningRelay> {
  const proc = Bun.spawn([...bin, 'relay', 'serve', '--data', data, '--port', '0', '--host', '127.0.0.1'], {
    cwd: ROOT_DIR,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader()
  let out = ''
  const deadline = Date.now() + 30_000
  while (!/listening on (http:\/\/\S+)/.test(out)) {
    if (Date.now() > deadline) throw new Error(`relay did not start: ${out}`)
    const { value, done } = await reader.read()
    if (done) throw new Error(`relay exited: ${out}${await new Response(proc.stderr as ReadableStream).text()}`)
    out += new TextDecoder().decode(value)
  }
  void (async () => {
    while (!(await reader.read()).done) {} // keep draining
  })()
  const url = /listening on (http:\/\/\S+)/.exec(out)![1]!
  const token = /admin token: (\S+)/.exec(out)?.[1] ?? null
  return {
    url,
    adminToken: token,
    proc,
    async stop(signal = 'SIGTERM') {
      proc.kill(signal)
      await proc.exited
    },
  }
}
