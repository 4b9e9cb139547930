// SSRF guard for webhook targets: http(s) only, and (unless WEBHOOK_ALLOW_PRIVATE_URLS) every address
// the host resolves to must be public. Checked at creation and again at every attempt; the attempt then
// connects to the very address that was checked (see sender.ts), so DNS rebinding cannot slip through.
import { lookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'

/** IPv4 addresses a webhook may never reach: loopback, private, link-local, shared, multicast, reserved… */
const blockedV4 = new BlockList()
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
] as const) blockedV4.addSubnet(net, bits, 'ipv4')

/**
 * IPv6 prefixes refused whole. The forms that embed an IPv4 address are decided one by one:
 * - IPv4-mapped `::ffff:0:0/96`: a dual-stack socket connects to the embedded IPv4 address, so the
 *   address is judged by it (see `embeddedV4`), whatever its spelling.
 * - IPv4-compatible `::/96` (with `::` and `::1`): deprecated since RFC 4291, no reachable host uses it;
 *   refused whole.
 * - IPv4-translated `::ffff:0:0:0/96` (SIIT, RFC 2765): only meaningful inside a translator; refused whole.
 * - NAT64 well-known prefix `64:ff9b::/96` (RFC 6052): a DNS64 resolver answers it for public IPv4 hosts
 *   on IPv6-only networks, so it is judged by the embedded address (`embeddedV4`).
 * - NAT64 local-use `64:ff9b:1::/48` (RFC 8215): where the IPv4 address sits is the operator's choice,
 *   and it serves a local network; refused whole.
 * - The rest of `::/8` (IETF reserved, e.g. `::1:ffff:a.b.c.d`) is refused whole.
 * - 6to4 `2002::/16` (embedded address in bits 16–47; its relays deprecated by RFC 7526): refused whole.
 * - Teredo `2001::/32` (server address in bits 32–63, client address inverted in the last 32 bits):
 *   refused whole, within the IETF protocol assignments `2001::/23`.
 */
const blockedV6 = new BlockList()
for (const [net, bits] of [
  ['::', 8], // IETF reserved: holds every form below up to NAT64, and nothing reachable besides
  ['::', 96], // IPv4-compatible, "unspecified" ::, loopback ::1
  ['::ffff:0:0:0', 96], // IPv4-translated
  ['64:ff9b:1::', 48], // NAT64 local use
  ['100::', 64], // discard
  ['2001::', 23], // IETF protocol assignments (Teredo 2001::/32, …)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4
  ['3fff::', 20], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) blockedV6.addSubnet(net, bits, 'ipv6')

/** The eight 16-bit groups of an IPv6 address in any textual form (`::`, embedded dotted quad); null if not one. */
export function ipv6Groups(address: string): number[] | null {
  if (isIP(address) !== 6 || address.includes('%')) return null // a zone names a local interface
  const [head, tail, ...more] = address.split('::')
  if (more.length) return null
  const parse = (part: string | undefined): number[] | null => {
    if (!part) return []
    const out: number[] = []
    const pieces = part.split(':')
    for (let i = 0; i < pieces.length; i++) {
      const p = pieces[i]
      if (i === pieces.length - 1 && p.includes('.')) {
        if (isIP(p) !== 4) return null
        const [a, b, c, d] = p.split('.').map(Number)
        out.push((a << 8) | b, (c << 8) | d)
      } else if (/^[0-9a-f]{1,4}$/i.test(p)) out.push(parseInt(p, 16))
      else return null
    }
    return out
  }
  const h = parse(head)
  const t = tail === undefined ? [] : parse(tail)
  if (!h || !t) return null
  if (tail === undefined) return h.length === 8 ? h : null
  const gap = 8 - h.length - t.length
  return gap >= 1 ? [...h, ...new Array<number>(gap).fill(0), ...t] : null
}

/** The IPv4 address an IPv6 address stands for (IPv4-mapped, NAT64 well-known prefix), or null. */
function embeddedV4(g: number[]): string | null {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0)
  const mapped = zeros(0, 5) && g[5] === 0xffff
  const nat64 = g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)
  if (!mapped && !nat64) return null
  return `${g[6] >> 8}.${g[6] & 0xff}.${g[7] >> 8}.${g[7] & 0xff}`
}

export function isPublicAddress(address: string): boolean {
  const family = isIP(address)
  if (family === 4) return !blockedV4.check(address, 'ipv4')
  if (family !== 6) return false
  const groups = ipv6Groups(address)
  if (!groups) return false
  const v4 = embeddedV4(groups)
  if (v4 !== null) return !blockedV4.check(v4, 'ipv4')
  return !blockedV6.check(groups.map((x) => x.toString(16)).join(':'), 'ipv6')
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
/** How long a host's answer is reused (Bun's own fetch keeps its DNS answers 30 s). */
const DNS_REUSE_MS = 5_000
/** Hosts remembered at most; past it the memory starts again (a node delivers to far fewer). */
const MAX_HOSTS = 10_000

export type LookupAll = (host: string) => Promise<string[]>

const systemLookup: LookupAll = async (host) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address)

/**
 * The addresses a host name resolves to, each answer reused for a few seconds: an attempt checks its
 * target every time, and a burst to one endpoint would otherwise run a lookup per attempt (≈20 µs of
 * CPU each even from /etc/hosts, a resolver's round trip otherwise; `bun run bench:webhooks` prints
 * both). Attempts that ask while a lookup is running share it. Failures are not kept. Only the
 * answer is reused, never the verdict: every attempt checks the addresses again, and connects to the
 * one it checked.
 */
export class HostAddresses {
  private readonly answers = new Map<string, { addresses: Promise<string[]>; until: number }>()

  constructor(
    private readonly lookupAll: LookupAll = systemLookup,
    private readonly reuseMs = DNS_REUSE_MS,
    private readonly now = () => performance.now(),
  ) {}

  of(host: string): Promise<string[]> {
    if (isIP(host)) return Promise.resolve([host])
    const kept = this.answers.get(host)
    if (kept !== undefined && kept.until > this.now()) return kept.addresses
    const addresses = withDnsTimeout(this.lookupAll(host))
    if (this.answers.size >= MAX_HOSTS) this.answers.clear()
    const entry = { addresses, until: this.now() + this.reuseMs }
    this.answers.set(host, entry)
    addresses.catch(() => {
      if (this.answers.get(host) === entry) this.answers.delete(host)
    })
    return addresses
  }
}

async function withDnsTimeout(lookingUp: Promise<string[]>): Promise<string[]> {
  let timer: Timer | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('DNS lookup timed out')), DNS_TIMEOUT_MS)
  })
  try {
    return await Promise.race([lookingUp, timeout])
  } finally {
    clearTimeout(timer)
  }
}

const hostAddresses = new HostAddresses()

/**
 * Resolves the URL's host and checks every address. `address` is the one to connect to (null when
 * private targets are allowed: then the URL is used as is). Never throws.
 */
export async function resolveTarget(text: string, allowPrivate: boolean, hosts = hostAddresses): Promise<Target> {
  const parsed = parseWebhookUrl(text)
  if (!parsed.ok) return parsed
  if (allowPrivate) return { ok: true, url: parsed.url, address: null }
  const host = parsed.url.hostname.replace(/^\[(.*)\]$/, '$1')
  let addresses: string[]
  try {
    addresses = await hosts.of(host)
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
