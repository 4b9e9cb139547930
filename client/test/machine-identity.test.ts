// machineIdentity() (src/machine-identity.ts): stable across processes on this machine; a fresh network
// namespace or another hostname changes only those components (real Linux namespaces via `unshare`,
// and the same through injected readers); KEYWARD_MACHINE_ID makes the `container` component and the
// fingerprint; no raw value (machine id, hostname, MAC, CPU model, serial) appears in what it returns;
// each OS's sources parsed through injected readers (Linux sysfs, macOS ioreg, Windows reg/PowerShell/
// wmic, browsers).
import { describe, expect, setDefaultTimeout, test } from 'bun:test'
import { spawnSync } from 'node:child_process'
import { cpus, hostname } from 'node:os'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { componentsMatch, machineIdentity, memoryStorage, type MachineIdentity, type SystemReaders } from '../src/index.ts'
import { hashComponent } from '../src/machine-identity.ts'

setDefaultTimeout(60_000)

const SCRIPT = join(import.meta.dir, 'support', 'print-identity.ts')
const linux = process.platform === 'linux'

function run(prefix: string[] = [], env: Record<string, string | undefined> = {}, product = 'prod_test'): MachineIdentity {
  const cmd = [...prefix, process.execPath, SCRIPT, product]
  const r = spawnSync(cmd[0], cmd.slice(1), { env: { ...process.env, KEYWARD_MACHINE_ID: undefined, ...env }, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`${cmd.join(' ')} exited ${r.status}: ${r.stderr}`)
  return JSON.parse(r.stdout.trim())
}

/** The raw values this machine shows, none of which may appear in an identity's output. */
function rawValues(): string[] {
  const out = [hostname(), hostname().toLowerCase(), cpus()[0]?.model ?? '']
  if (linux) {
    for (const p of ['/etc/machine-id', '/var/lib/dbus/machine-id', '/sys/block/vda/serial']) {
      try {
        out.push(readFileSync(p, 'utf8').trim())
      } catch {}
    }
    const net = spawnSync('sh', ['-c', 'cat /sys/class/net/*/address'], { encoding: 'utf8' }).stdout
    out.push(...net.split('\n').map((s) => s.trim()).filter((s) => s && s !== '00:00:00:00:00:00'))
  }
  return out.filter((v) => v.length >= 4)
}

const differing = (a: MachineIdentity, b: MachineIdentity) =>
  [...new Set([...Object.keys(a.components), ...Object.keys(b.components)])].filter((n) => a.components[n] !== b.components[n]).sort()

describe('on this machine', () => {
  test('two separate processes give the same fingerprint and components; each hash is 64 hex; no raw value in the output', () => {
    const a = run()
    const b = run()
    expect(b).toEqual(a)
    expect(a.fingerprint).toMatch(/^[0-9a-f]{64}$/)
    expect(Object.keys(a.components).length).toBeGreaterThanOrEqual(2)
    for (const hash of Object.values(a.components)) expect(hash).toMatch(/^[0-9a-f]{64}$/)
    if (linux) expect(a).toMatchObject({ basis: 'machine_id', components: { machine_id: expect.any(String), cpu: expect.any(String), hostname: expect.any(String) } })
    const text = JSON.stringify(a)
    const raws = rawValues()
    expect(raws.length).toBeGreaterThan(1)
    for (const raw of raws) expect(text.includes(raw)).toBe(false)
  })

  test.if(linux)('the fingerprint is the one earlier versions derived from the machine id (an update costs no seat)', async () => {
    const { createHash } = await import('node:crypto')
    const machineId = readFileSync('/etc/machine-id', 'utf8').trim()
    expect(run().fingerprint).toBe(createHash('sha256').update(`keyward-fingerprint/v1\nprod_test\n${machineId}`).digest('hex'))
  })

  test('another product (salt) sees unrelated hashes for the same machine', () => {
    const a = run([], {}, 'prod_one')
    const b = run([], {}, 'prod_two')
    expect(b.fingerprint).not.toBe(a.fingerprint)
    for (const name of Object.keys(a.components)) expect(b.components[name]).not.toBe(a.components[name])
  })

  // Real namespaces: `unshare -r` maps this user to root in a new user namespace (no privilege needed
  // where unprivileged user namespaces are allowed, as here); -n a fresh network namespace (only `lo`,
  // so sysfs is mounted again inside it to show that), -u a fresh hostname.
  const unshareWorks = linux && spawnSync('unshare', ['-rn', 'true']).status === 0
  test.if(linux)('a fresh network namespace changes only `mac`; another hostname only `hostname`; the fingerprint stays', () => {
    if (!unshareWorks) throw new Error('unshare -rn is not available here: user namespaces are needed for this test')
    const base = run()
    const netns = run(['unshare', '-rnm', 'sh', '-c', 'mount -t sysfs sysfs /sys && exec "$@"', 'sh'])
    expect(netns.fingerprint).toBe(base.fingerprint)
    // This machine has a physical interface (eth0, a /sys/class/net/*/device link): in the new namespace it is gone.
    expect(base.components.mac).toBeDefined()
    expect(differing(base, netns)).toEqual(['mac'])
    const renamed = run(['unshare', '-ru', 'sh', '-c', 'hostname keyward-test-other && exec "$@"', 'sh'])
    expect(renamed.fingerprint).toBe(base.fingerprint)
    expect(differing(base, renamed)).toEqual(['hostname'])
    // And so the rule decides: the namespace's set still matches under any, two and most, not all.
    expect(['any', 'two', 'most', 'all'].map((r) => componentsMatch(r as 'any', base.components, netns.components))).toEqual([true, true, true, false])
  })

  test('KEYWARD_MACHINE_ID: the container component and the fingerprint basis; stable per id; the id never shown', () => {
    const host = run()
    const id = 'pod-7f3c2a9e-secret-id-4711'
    const a = run([], { KEYWARD_MACHINE_ID: id })
    const b = run([], { KEYWARD_MACHINE_ID: id })
    const other = run([], { KEYWARD_MACHINE_ID: 'pod-another-one' })
    expect(b).toEqual(a)
    expect(a.basis).toBe('container')
    expect(a.components.container).toMatch(/^[0-9a-f]{64}$/)
    expect(a.fingerprint).not.toBe(host.fingerprint)
    expect(other.fingerprint).not.toBe(a.fingerprint)
    expect(other.components.container).not.toBe(a.components.container)
    // Nothing of the host goes with it: every container on a host would share that.
    expect(Object.keys(a.components)).toEqual(['container'])
    expect(JSON.stringify(a).includes(id)).toBe(false)
  })
})

/** A Linux machine as sysfs shows it, in memory. */
function fakeLinux(files: Record<string, string>, over: Partial<SystemReaders> = {}): Partial<SystemReaders> {
  const dirs = (path: string) => [...new Set(Object.keys(files).filter((f) => f.startsWith(path + '/')).map((f) => f.slice(path.length + 1).split('/')[0]))]
  return {
    platform: 'linux',
    env: () => null,
    readFile: async (p) => files[p] ?? null,
    readDir: async (p) => dirs(p),
    exists: async (p) => Object.keys(files).some((f) => f === p || f.startsWith(p + '/')),
    exec: async () => null,
    hostname: async () => 'Build-Box',
    cpuModel: async () => 'Fallback CPU',
    interfaces: async () => [],
    ...over,
  }
}

const MACHINE = {
  '/etc/machine-id': '3d1219c7c4c5404aaa1f6d2a48adfda4\n',
  '/sys/class/dmi/id/product_uuid': 'To be filled by O.E.M.\n',
  '/sys/class/dmi/id/board_serial': 'BSN-12345\n',
  '/sys/block/loop0/removable': '0',
  '/sys/block/loop0/serial': 'LOOPSERIAL',
  '/sys/block/sdb/removable': '1',
  '/sys/block/sdb/device/serial': 'USBSTICK',
  '/sys/block/nvme0n1/removable': '0',
  '/sys/block/nvme0n1/device/serial': 'S4EVNX0N123456\n',
  '/sys/class/net/enp3s0/device/vendor': '0x8086',
  '/sys/class/net/enp3s0/address': 'a8:a1:59:00:11:22\n',
  '/sys/class/net/enp3s0/addr_assign_type': '0\n',
  '/sys/class/net/wlp2s0/device/vendor': '0x8086',
  '/sys/class/net/wlp2s0/address': '9c:b6:d0:33:44:55\n',
  '/sys/class/net/wlp2s0/addr_assign_type': '3\n', // a random (privacy) address
  '/sys/class/net/docker0/address': '02:42:ac:11:00:01',
  '/sys/class/net/veth12ab/address': '7a:11:22:33:44:55',
  '/sys/class/net/lo/address': '00:00:00:00:00:00',
  '/proc/cpuinfo': 'processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Core(TM) i7-8550U CPU @ 1.80GHz\n',
}

describe('sources, through injected readers', () => {
  const salt = 'prod_x'
  test('Linux: machine id, board serial (placeholder UUID skipped), first fixed disk, permanent physical MACs only, CPU, hostname', async () => {
    const id = await machineIdentity({ salt, system: fakeLinux(MACHINE) })
    expect(id.basis).toBe('machine_id')
    expect(id.components).toEqual({
      machine_id: await hashComponent(salt, 'machine_id', '3d1219c7c4c5404aaa1f6d2a48adfda4'),
      board: await hashComponent(salt, 'board', 'BSN-12345'),
      disk: await hashComponent(salt, 'disk', 'S4EVNX0N123456'),
      mac: await hashComponent(salt, 'mac', 'a8:a1:59:00:11:22'),
      cpu: await hashComponent(salt, 'cpu', 'Intel(R) Core(TM) i7-8550U CPU @ 1.80GHz'),
      hostname: await hashComponent(salt, 'hostname', 'build-box'),
    })
  })

  test('a fresh network namespace (no physical interface) or a new hostname changes only that component', async () => {
    const base = await machineIdentity({ salt, system: fakeLinux(MACHINE) })
    const noNet = Object.fromEntries(Object.entries(MACHINE).filter(([p]) => !p.startsWith('/sys/class/net/')))
    const netns = await machineIdentity({ salt, system: fakeLinux({ ...noNet, '/sys/class/net/lo/address': '00:00:00:00:00:00' }) })
    expect(netns.fingerprint).toBe(base.fingerprint)
    expect(differing(base, netns)).toEqual(['mac'])
    const renamed = await machineIdentity({ salt, system: fakeLinux(MACHINE, { hostname: async () => 'other' }) })
    expect(renamed.fingerprint).toBe(base.fingerprint)
    expect(differing(base, renamed)).toEqual(['hostname'])
    // A reinstall: a new machine id (so a new fingerprint) on the same hardware still matches under `most`.
    const reinstalled = await machineIdentity({ salt, system: fakeLinux({ ...MACHINE, '/etc/machine-id': 'ffeeddccbbaa99887766554433221100' }) })
    expect(reinstalled.fingerprint).not.toBe(base.fingerprint)
    expect(differing(base, reinstalled)).toEqual(['machine_id'])
    expect(componentsMatch('most', base.components, reinstalled.components)).toBe(true)
  })

  test('no machine id: the fingerprint comes from a random id kept in storage (stable while the storage is)', async () => {
    const storage = memoryStorage()
    const files = { ...MACHINE, '/etc/machine-id': '' }
    const a = await machineIdentity({ salt, storage, system: fakeLinux(files) })
    const b = await machineIdentity({ salt, storage, system: fakeLinux(files) })
    const fresh = await machineIdentity({ salt, storage: memoryStorage(), system: fakeLinux(files) })
    expect(a.basis).toBe('stored')
    expect(b).toEqual(a)
    expect(fresh.fingerprint).not.toBe(a.fingerprint)
    expect(a.components.stored_id).toMatch(/^[0-9a-f]{64}$/)
    expect(a.components.machine_id).toBeUndefined()
  })

  test('KEYWARD_MACHINE_ID through env: the only component, and the fingerprint from it; blank is unset', async () => {
    const withId = (v: string) => fakeLinux(MACHINE, { env: (n) => (n === 'KEYWARD_MACHINE_ID' ? v : null) })
    const id = await machineIdentity({ salt, system: withId(' worker-3 ') })
    expect(id.basis).toBe('container')
    expect(id.components).toEqual({ container: await hashComponent(salt, 'container', 'worker-3') })
    expect((await machineIdentity({ salt, system: withId('  ') })).basis).toBe('machine_id')
  })

  test('macOS: ioreg UUID and serial, sysctl CPU, en* MACs (random, locally administered ones skipped)', async () => {
    const exec = async (file: string, args: string[]) =>
      file === 'ioreg' && args.join(' ') === '-rd1 -c IOPlatformExpertDevice'
        ? '+-o J314sAP  <class IOPlatformExpertDevice>\n    "IOPlatformSerialNumber" = "C02XG0FDH7JY"\n    "IOPlatformUUID" = "564D8C3A-1B2C-4D5E-8F90-123456789ABC"\n'
        : file === 'sysctl' ? 'Apple M1 Pro\n' : null
    const id = await machineIdentity({
      salt,
      system: fakeLinux({}, {
        platform: 'darwin', exec, hostname: async () => 'Alices-MacBook-Pro.local',
        interfaces: async () => [{ name: 'en0', mac: 'F0:18:98:AA:BB:CC' }, { name: 'en1', mac: '36:aa:bb:cc:dd:ee' }, { name: 'utun0', mac: '00:00:00:00:00:00' }, { name: 'bridge0', mac: 'f0:18:98:00:00:01' }],
      }),
    })
    expect(id.components).toEqual({
      machine_id: await hashComponent(salt, 'machine_id', '564D8C3A-1B2C-4D5E-8F90-123456789ABC'),
      board: await hashComponent(salt, 'board', 'C02XG0FDH7JY'),
      mac: await hashComponent(salt, 'mac', 'f0:18:98:aa:bb:cc'),
      cpu: await hashComponent(salt, 'cpu', 'Apple M1 Pro'),
      hostname: await hashComponent(salt, 'hostname', 'alices-macbook-pro.local'),
    })
  })

  test('Windows: MachineGuid, PowerShell board/disk serials, wmic when PowerShell says nothing, physical adapters', async () => {
    const reg = '\r\nHKEY_LOCAL_MACHINE\\SOFTWARE\\Microsoft\\Cryptography\r\n    MachineGuid    REG_SZ    6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b\r\n'
    const execWith = (ps: string | null) => async (file: string, args: string[]) =>
      file === 'reg' ? reg
      : file === 'powershell.exe' ? ps
      : file === 'wmic' && args[0] === 'baseboard' ? 'SerialNumber  \r\nPF2ABCDE  \r\n'
      : file === 'wmic' && args[0] === 'diskdrive' ? 'SerialNumber\r\n0025_3881_0123_4567.\r\n'
      : null
    const system = (ps: string | null) =>
      fakeLinux({}, {
        platform: 'win32', exec: execWith(ps), hostname: async () => 'DESKTOP-7K2M9QX', cpuModel: async () => 'AMD Ryzen 7 5800X 8-Core Processor',
        interfaces: async () => [{ name: 'Ethernet', mac: '04:d4:c4:01:02:03' }, { name: 'vEthernet (WSL)', mac: '00:15:5d:01:02:03' }, { name: 'VirtualBox Host-Only Network', mac: '0a:00:27:00:00:05' }],
      })
    const viaPs = await machineIdentity({ salt, system: system('board=PF2ABCDE\r\ndisk=0025_3881_0123_4567.\r\n') })
    const viaWmic = await machineIdentity({ salt, system: system(null) })
    expect(viaWmic).toEqual(viaPs)
    expect(viaPs.components).toEqual({
      machine_id: await hashComponent(salt, 'machine_id', '6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b'),
      board: await hashComponent(salt, 'board', 'PF2ABCDE'),
      disk: await hashComponent(salt, 'disk', '0025_3881_0123_4567.'),
      mac: await hashComponent(salt, 'mac', '04:d4:c4:01:02:03'),
      cpu: await hashComponent(salt, 'cpu', 'AMD Ryzen 7 5800X 8-Core Processor'),
      hostname: await hashComponent(salt, 'hostname', 'desktop-7k2m9qx'),
    })
  })

  test('browsers: a stored random id, the user agent without version numbers, the platform', async () => {
    const storage = memoryStorage()
    const browser = (ua: string) => ({ platform: 'browser', env: () => null, userAgent: () => ua, browserPlatform: () => 'macOS' })
    const a = await machineIdentity({ salt, storage, system: browser('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Chrome/130.0.0.0 Safari/537.36') })
    const updated = await machineIdentity({ salt, storage, system: browser('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Chrome/131.0.6778.86 Safari/537.36') })
    expect(a.basis).toBe('stored')
    expect(Object.keys(a.components).sort()).toEqual(['browser_id', 'platform', 'user_agent'])
    expect(updated).toEqual(a) // a browser update changes nothing
    const cleared = await machineIdentity({ salt, storage: memoryStorage(), system: browser('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Chrome/130.0.0.0 Safari/537.36') })
    expect(cleared.fingerprint).not.toBe(a.fingerprint) // cleared site data: a new device
    expect(differing(a, cleared)).toEqual(['browser_id'])
  })

  test('a reader that throws contributes nothing; the rest still count', async () => {
    const id = await machineIdentity({ salt, system: fakeLinux(MACHINE, { readDir: async () => { throw new Error('EACCES') } }) })
    expect(Object.keys(id.components)).toEqual(['machine_id', 'board', 'cpu', 'hostname'])
  })
})
