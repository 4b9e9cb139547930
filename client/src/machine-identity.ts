// machineIdentity(): this device's fingerprint and its components (docs/integrating.md, "Identifying
// machines"; client/README.md, "Machine identity").
//
// Each component is SHA-256 of "keyward-component/v1\n" + salt + "\n" + name + "\n" + the value the OS
// shows, so no raw serial, id or address leaves the device, and two products (two salts) see unrelated
// hashes for one computer. The fingerprint is SHA-256 of "keyward-fingerprint/v1\n" + salt + "\n" + the
// most stable value there is: KEYWARD_MACHINE_ID when set (containers), else the OS machine id (the
// same derivation as earlier versions of this package, so an update costs no device its seat), else a
// random id kept in the client's storage (`basis: 'stored'`: as stable as that storage).
//
// What is read, with no root and no extra permission (anything unreadable is left out):
// - Linux: /etc/machine-id or /var/lib/dbus/machine-id; /sys/class/dmi/id/product_uuid and board_serial
//   when readable; the serial of the first fixed disk (/sys/block/*/device/serial, /sys/block/*/serial,
//   or the names in /dev/disk/by-id); the permanent MACs of physical network interfaces (those with a
//   /sys/class/net/*/device link; docker, veth, bridges, tunnels and random addresses skipped); the CPU
//   model (/proc/cpuinfo); the hostname.
// - macOS: `ioreg -rd1 -c IOPlatformExpertDevice` (IOPlatformUUID, IOPlatformSerialNumber), `sysctl -n
//   machdep.cpu.brand_string`, MACs of en* interfaces, the hostname.
// - Windows: MachineGuid (`reg query`), the board and first disk serials (PowerShell CIM, else wmic),
//   the CPU model, MACs of physical adapters, the hostname.
// - Containers: KEYWARD_MACHINE_ID set → `container` is the only component, and the fingerprint's basis.
// - Browsers (and Workers): what a page can see is not a machine, so only a documented subset:
//   `browser_id` (a random id kept in storage), `user_agent` (version numbers removed, so an update
//   keeps it) and `platform`. See client/README.md for what that can and cannot tell.
// Platform code is reached through dynamic imports (storage.ts nodeModule) only where Node built-ins
// exist, so a browser bundle never loads it.
import { randomBytes, sha256, toHex } from './encoding.js'
import { defaultStorage, nodeModule, type KeywardStorage } from './storage.js'
import type { Components } from './component-match.js'

export type { Components } from './component-match.js'

export interface MachineIdentity {
  /** 64 lower-case hex: what validate sends as `device_fingerprint`. */
  fingerprint: string
  /** `{name: hash}`, 1..16 entries: what validate sends as `components`. */
  components: Record<string, string>
  /** Which value the fingerprint comes from (never the value itself). */
  basis: 'container' | 'machine_id' | 'stored'
}

/** What the OS shows, as raw strings; injectable for tests and unusual platforms. Every reader may answer null. */
export interface SystemReaders {
  /** 'linux', 'darwin', 'win32', ... or 'browser' where there are no Node built-ins. */
  platform: string
  env(name: string): string | null
  readFile(path: string): Promise<string | null>
  readDir(path: string): Promise<string[]>
  exists(path: string): Promise<boolean>
  exec(file: string, args: string[]): Promise<string | null>
  hostname(): Promise<string | null>
  /** The CPU model as Node's os.cpus() tells it (the fallback where the OS-specific source says nothing). */
  cpuModel(): Promise<string | null>
  /** Non-internal interfaces: name and MAC (macOS and Windows; Linux reads /sys/class/net). */
  interfaces(): Promise<{ name: string; mac: string }[]>
  /** Browsers: navigator.userAgent and the platform. */
  userAgent(): string | null
  browserPlatform(): string | null
}

export interface MachineIdentityOptions {
  /** Salts every hash; default the productId (so each product sees its own values), else ''. */
  salt?: string
  /** Your product's id: the default salt (the Keyward client passes its own). */
  productId?: string
  /** Where a random id is kept when the OS shows none (browsers, sandboxes). Default: localStorage in browsers, memory elsewhere. */
  storage?: KeywardStorage
  /** Replaces some or all of the OS readers (tests; a platform this package does not know). */
  system?: Partial<SystemReaders>
}

const DEVICE_ID = 'device-id'
const MAX = 16

/** The device's fingerprint and components; see the file's head for what each OS contributes. */
export async function machineIdentity(options: MachineIdentityOptions = {}): Promise<MachineIdentity> {
  const salt = options.salt ?? options.productId ?? ''
  const sys: SystemReaders = { ...(await defaultReaders()), ...options.system }
  const raw = await readComponents(sys)
  const components: Record<string, string> = {}
  for (const [name, value] of raw.slice(0, MAX)) components[name] = await hashComponent(salt, name, value)
  const container = meaningful(sys.env('KEYWARD_MACHINE_ID'))
  let basis: MachineIdentity['basis']
  let value: string
  if (container) [basis, value] = ['container', `container:${container}`]
  else if (raw.some(([n]) => n === 'machine_id')) [basis, value] = ['machine_id', raw.find(([n]) => n === 'machine_id')![1]]
  else {
    const storage = options.storage ?? defaultStorage()
    let id = await storage.get(DEVICE_ID)
    if (!id) {
      id = `random:${toHex(randomBytes(32))}`
      await storage.set(DEVICE_ID, id)
    }
    ;[basis, value] = ['stored', id]
    // The stored id is the one thing a browser (or a sandbox) keeps: it is its own component.
    const name = sys.platform === 'browser' ? 'browser_id' : 'stored_id'
    if (Object.keys(components).length < MAX) components[name] = await hashComponent(salt, name, id)
  }
  return { fingerprint: toHex(await sha256(`keyward-fingerprint/v1\n${salt}\n${value}`)), components, basis }
}

/** One component's hash: salted, named (equal values under two names hash apart), never the raw value. */
export async function hashComponent(salt: string, name: string, value: string): Promise<string> {
  return toHex(await sha256(`keyward-component/v1\n${salt}\n${name}\n${value}`))
}

/** Values that firmware ships as placeholders: they identify nothing. */
const PLACEHOLDER = /^(?:|0+|none|null|n\/a|unknown|default string|to be filled by o\.e\.m\.|system serial number|not specified|not applicable|[0f]{8}-?[0f]{4}-?[0f]{4}-?[0f]{4}-?[0f]{12}|03000200-0400-0500-0006-000700080009)$/i
const meaningful = (v: string | null | undefined): string | null => {
  const s = (v ?? '').replace(/\0/g, '').trim()
  return PLACEHOLDER.test(s) ? null : s
}

/** [name, raw value] pairs in a fixed order, the stable ones first; only inside this file, never returned. */
async function readComponents(sys: SystemReaders): Promise<[string, string][]> {
  const out: [string, string][] = []
  const add = (name: string, value: string | null | undefined) => {
    const v = meaningful(value)
    if (v !== null && !out.some(([n]) => n === name)) out.push([name, v])
  }
  // In a container, what shows of the host (its disk, CPU, the image's machine id) is the same for every
  // container on it, so it would make one workload look like a copy of the next: the operator's id
  // stands alone (docs/integrating.md, "Identifying machines", Containers and Kubernetes).
  const container = meaningful(sys.env('KEYWARD_MACHINE_ID'))
  if (container) return [['container', container]]
  if (sys.platform === 'browser') {
    const ua = sys.userAgent()
    // Version numbers change with every browser update; the browser and OS family does not.
    add('user_agent', ua === null ? null : ua.replace(/[0-9]+/g, '#'))
    add('platform', sys.browserPlatform())
    return out
  }
  try {
    if (sys.platform === 'darwin') await readMac(sys, add)
    else if (sys.platform === 'win32') await readWindows(sys, add)
    else await readLinux(sys, add)
  } catch {
    // A reader that throws contributes nothing; the others still count.
  }
  add('cpu', await sys.cpuModel().catch(() => null))
  add('hostname', (await sys.hostname().catch(() => null))?.toLowerCase())
  return out
}

type Add = (name: string, value: string | null | undefined) => void

async function readLinux(sys: SystemReaders, add: Add) {
  for (const path of ['/etc/machine-id', '/var/lib/dbus/machine-id']) {
    const id = meaningful(await sys.readFile(path))
    if (id) {
      add('machine_id', id)
      break
    }
  }
  add('board', meaningful(await sys.readFile('/sys/class/dmi/id/product_uuid'))?.toLowerCase() ?? (await sys.readFile('/sys/class/dmi/id/board_serial')))
  add('disk', await linuxDisk(sys).catch(() => null))
  add('mac', await linuxMacs(sys).catch(() => null))
  const cpuinfo = (await sys.readFile('/proc/cpuinfo')) ?? ''
  const model = /^(?:model name|Hardware|cpu model|Processor)\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]
  add('cpu', model)
}

/** The serial of the first fixed disk by name (loop, ram, zram, device-mapper, md, optical and removable ones skipped). */
async function linuxDisk(sys: SystemReaders): Promise<string | null> {
  const disks = (await sys.readDir('/sys/block')).filter((d) => !/^(?:loop|ram|zram|dm-|md|sr|fd|nbd)/.test(d)).sort()
  for (const d of disks) {
    if (((await sys.readFile(`/sys/block/${d}/removable`)) ?? '0').trim() === '1') continue
    const serial = meaningful(await sys.readFile(`/sys/block/${d}/device/serial`)) ?? meaningful(await sys.readFile(`/sys/block/${d}/serial`))
    if (serial) return serial
  }
  // SATA and SCSI disks show their serial in their by-id name (ata-MODEL_SERIAL), readable by anyone.
  const ids = (await sys.readDir('/dev/disk/by-id')).filter((n) => /^(?:ata|nvme|scsi)-/.test(n) && !/-part\d+$/.test(n) && !n.startsWith('nvme-eui')).sort()
  return ids[0] ?? null
}

const VIRTUAL_NIC = /^(?:lo|docker|veth|br-|virbr|vnet|tun|tap|wg|cni|flannel|cali|vxlan|kube|ifb|dummy|bond|team|zt|tailscale|utun|awdl|llw|bridge|vmnet|vboxnet)/
const NO_MAC = /^(?:00:){5}00$/

/** The permanent MACs of physical interfaces (a /sys/class/net/X/device link), sorted, comma-separated. */
async function linuxMacs(sys: SystemReaders): Promise<string | null> {
  const macs: string[] = []
  for (const name of (await sys.readDir('/sys/class/net')).sort()) {
    if (VIRTUAL_NIC.test(name) || !(await sys.exists(`/sys/class/net/${name}/device`))) continue
    // addr_assign_type 0: the permanent (burned-in) address; 1 and 3 are random, 2 stolen from another device.
    const assign = ((await sys.readFile(`/sys/class/net/${name}/addr_assign_type`)) ?? '0').trim()
    const mac = ((await sys.readFile(`/sys/class/net/${name}/address`)) ?? '').trim().toLowerCase()
    if (assign === '0' && /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/.test(mac) && !NO_MAC.test(mac)) macs.push(mac)
  }
  return macs.length ? [...new Set(macs)].sort().join(',') : null
}

/** MACs from the OS interface list (macOS, Windows): non-internal, not virtual by name, not locally administered (random). */
async function listedMacs(sys: SystemReaders, physical: RegExp | null): Promise<string | null> {
  const macs = (await sys.interfaces())
    .filter((i) => (physical ? physical.test(i.name) : !VIRTUAL_NIC.test(i.name.toLowerCase()) && !/virtual|vmware|hyper-v|vethernet|loopback|bluetooth|vpn|tap/i.test(i.name)))
    .map((i) => i.mac.toLowerCase())
    .filter((m) => /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/.test(m) && !NO_MAC.test(m) && (parseInt(m.slice(0, 2), 16) & 2) === 0)
  return macs.length ? [...new Set(macs)].sort().join(',') : null
}

async function readMac(sys: SystemReaders, add: Add) {
  const io = (await sys.exec('ioreg', ['-rd1', '-c', 'IOPlatformExpertDevice'])) ?? ''
  add('machine_id', /"IOPlatformUUID"\s*=\s*"([^"]+)"/.exec(io)?.[1])
  add('board', /"IOPlatformSerialNumber"\s*=\s*"([^"]+)"/.exec(io)?.[1])
  add('mac', await listedMacs(sys, /^en\d+$/))
  add('cpu', await sys.exec('sysctl', ['-n', 'machdep.cpu.brand_string']))
}

async function readWindows(sys: SystemReaders, add: Add) {
  const reg = (await sys.exec('reg', ['query', 'HKLM\\SOFTWARE\\Microsoft\\Cryptography', '/v', 'MachineGuid'])) ?? ''
  add('machine_id', /MachineGuid\s+REG_SZ\s+([0-9a-fA-F-]+)/.exec(reg)?.[1])
  // One PowerShell start for both serials; wmic (deprecated, absent on new installs) only when PowerShell says nothing.
  const ps = await sys.exec('powershell.exe', [
    '-NoProfile', '-NonInteractive', '-Command',
    "$b=(Get-CimInstance Win32_BaseBoard).SerialNumber; $d=(Get-CimInstance Win32_DiskDrive | Where-Object {$_.Index -eq 0}).SerialNumber; Write-Output \"board=$b\"; Write-Output \"disk=$d\"",
  ])
  let board = ps ? /^board=(.*)$/m.exec(ps)?.[1] : null
  let disk = ps ? /^disk=(.*)$/m.exec(ps)?.[1] : null
  if (!meaningful(board)) board = lastLine(await sys.exec('wmic', ['baseboard', 'get', 'serialnumber']))
  if (!meaningful(disk)) disk = lastLine(await sys.exec('wmic', ['diskdrive', 'where', 'index=0', 'get', 'serialnumber']))
  add('board', board)
  add('disk', disk)
  add('mac', await listedMacs(sys, null))
}

/** wmic prints a header line, then the value. */
const lastLine = (out: string | null) => (out ?? '').split(/\r?\n/).map((l) => l.trim()).filter(Boolean).slice(1)[0] ?? null

interface NodeProcessLike {
  platform: string
  versions?: { node?: string }
  env?: Record<string, string | undefined>
}

/** The OS readers of Node, Bun and Deno (node: built-ins), or the browser's. */
async function defaultReaders(): Promise<SystemReaders> {
  const proc = (globalThis as { process?: NodeProcessLike }).process
  const nav = (globalThis as { navigator?: { userAgent?: string; platform?: string; userAgentData?: { platform?: string } } }).navigator
  const browser: SystemReaders = {
    platform: 'browser',
    env: () => null,
    readFile: async () => null,
    readDir: async () => [],
    exists: async () => false,
    exec: async () => null,
    hostname: async () => null,
    cpuModel: async () => null,
    interfaces: async () => [],
    userAgent: () => nav?.userAgent ?? null,
    browserPlatform: () => nav?.userAgentData?.platform ?? nav?.platform ?? null,
  }
  if (!proc?.versions?.node) return browser
  const fs = () => nodeModule<{ readFile(p: string, e: 'utf8'): Promise<string>; readdir(p: string): Promise<string[]>; access(p: string): Promise<void> }>('fs/promises')
  const os = () => nodeModule<{ hostname(): string; cpus(): { model: string }[]; networkInterfaces(): Record<string, { mac: string; internal: boolean }[] | undefined> }>('os')
  type ExecFile = (file: string, args: string[], options: { timeout: number; windowsHide: boolean }, cb: (err: unknown, stdout: string) => void) => void
  return {
    platform: proc.platform,
    env: (name) => {
      try {
        return proc.env?.[name] ?? null
      } catch {
        return null // Deno without --allow-env
      }
    },
    readFile: async (path) => (await fs()).readFile(path, 'utf8').catch(() => null),
    readDir: async (path) => (await fs()).readdir(path).catch(() => []),
    exists: async (path) => (await fs()).access(path).then(() => true, () => false),
    exec: (file, args) =>
      nodeModule<{ execFile: ExecFile }>('child_process').then(
        ({ execFile }) => new Promise((resolve) => execFile(file, args, { timeout: 5000, windowsHide: true }, (err, stdout) => resolve(err ? null : String(stdout)))),
        () => null,
      ),
    hostname: async () => (await os()).hostname(),
    cpuModel: async () => (await os()).cpus()[0]?.model ?? null,
    interfaces: async () =>
      Object.entries((await os()).networkInterfaces()).flatMap(([name, list]) => (list ?? []).filter((i) => !i.internal).map((i) => ({ name, mac: i.mac }))),
    userAgent: () => null,
    browserPlatform: () => null,
  }
}
