// SSRF guard for webhook targets: http(s) only, and (unless WEBHOOK_ALLOW_PRIVATE_URLS) every address
// the host resolves to must be public. Checked at creation and again at every attempt; the attempt then
// connects to the very address that was checked (see sender.ts), so DNS rebinding cannot slip through.
import { lookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'

/** Addresses a webhook may never reach: loopback, private, link-local, shared, multicast, reserved… */
const blocked = new BlockList()
for (const [net, bits] of [
  ['0.0.0.0', 8], // "this network"; 0.0.0.0 reaches the local host
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) blocked.addSubnet(net, bits, 'ipv4')
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96], // NAT64: may translate to anything
  ['64:ff9b:1::', 48],
  ['100::', 64], // discard
  ['2001::', 23], // IETF protocol assignments (Teredo, …)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: embeds an IPv4 address
  ['3fff::', 20], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) blocked.addSubnet(net, bits, 'ipv6')

const MAPPED_V4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i

export function isPublicAddress(address: string): boolean {
  const mapped = MAPPED_V4.exec(address)
  if (mapped) return isPublicAddress(mapped[1])
  const family = isIP(address)
  if (family === 4) return !blocked.check(address, 'ipv4')
  if (family === 6) return !blocked.check(address, 'ipv6')
  return false
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string }
export type Target = { ok: true; url: URL; address: string | null } | { ok: false; reason: string }

/** Syntax only: an absolute http(s) URL with a host. */
export function parseWebhookUrl(text: string): UrlCheck {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return { ok: false, reason: 'must be an absolute http or https URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, reason: 'must use http or https' }
  if (!url.hostname) return { ok: false, reason: 'must name a host' }
  return { ok: true, url }
}

const DNS_TIMEOUT_MS = 5_000

async function resolveAll(host: string): Promise<string[]> {
  if (isIP(host)) return [host]
  let timer: Timer | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('DNS lookup timed out')), DNS_TIMEOUT_MS)
  })
  try {
    const found = await Promise.race([lookup(host, { all: true, verbatim: true }), timeout])
    return found.map((a) => a.address)
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Resolves the URL's host and checks every address. `address` is the one to connect to (null when
 * private targets are allowed: then the URL is used as is). Never throws.
 */
export async function resolveTarget(text: string, allowPrivate: boolean): Promise<Target> {
  const parsed = parseWebhookUrl(text)
  if (!parsed.ok) return parsed
  if (allowPrivate) return { ok: true, url: parsed.url, address: null }
  const host = parsed.url.hostname.replace(/^\[(.*)\]$/, '$1')
  let addresses: string[]
  try {
    addresses = await resolveAll(host)
  } catch (err) {
    return { ok: false, reason: `host ${host} could not be resolved (${(err as Error).message ?? 'DNS error'})` }
  }
  if (addresses.length === 0) return { ok: false, reason: `host ${host} has no address` }
  const bad = addresses.find((a) => !isPublicAddress(a))
  if (bad !== undefined) {
    return { ok: false, reason: `must not point to a loopback, private, link-local or reserved address (${host} is ${bad})` }
  }
  return { ok: true, url: parsed.url, address: addresses[0] }
}
