// The device fingerprint: 64 hex characters, stable across restarts and app updates, never the raw OS
// identifier. SHA-256 of "keyward-fingerprint/v1\n" + product id + "\n" + machine id, so two vendors (or
// two products) see different values for one computer and the machine id never leaves it.
//
// Machine ids: Linux /etc/machine-id (or /var/lib/dbus/machine-id), macOS IOPlatformUUID (ioreg),
// Windows MachineGuid (reg query). Where none is readable (browsers, Workers, sandboxes), a random id
// is created once and kept in the client's storage: stable for as long as that storage is (a browser
// profile's localStorage; clearing site data makes it a new device).
import { randomBytes, sha256, toHex } from './encoding.js'
import { nodeModule, type KeywardStorage } from './storage.js'

const DEVICE_ID = 'device-id'

interface NodeProcess {
  platform: string
  versions?: { node?: string }
}
type ExecFile = (file: string, args: string[], options: { timeout: number; windowsHide: boolean }, cb: (err: unknown, stdout: string) => void) => void

const nodeProcess = (): NodeProcess | null => {
  const p = (globalThis as { process?: NodeProcess }).process
  return p?.versions?.node ? p : null
}

function run(file: string, args: string[]): Promise<string> {
  return nodeModule<{ execFile: ExecFile }>('child_process').then(
    ({ execFile }) =>
      new Promise((resolve, reject) =>
        execFile(file, args, { timeout: 5000, windowsHide: true }, (err, stdout) => (err ? reject(err) : resolve(String(stdout)))),
      ),
  )
}

/** The OS machine id in Node/Bun/Deno, or null where there is none to read. */
export async function machineId(): Promise<string | null> {
  const proc = nodeProcess()
  if (!proc) return null
  try {
    if (proc.platform === 'darwin') {
      const out = await run('ioreg', ['-rd1', '-c', 'IOPlatformExpertDevice'])
      return /"IOPlatformUUID"\s*=\s*"([^"]+)"/.exec(out)?.[1] ?? null
    }
    if (proc.platform === 'win32') {
      const out = await run('reg', ['query', 'HKLM\\SOFTWARE\\Microsoft\\Cryptography', '/v', 'MachineGuid'])
      return /MachineGuid\s+REG_SZ\s+([0-9a-fA-F-]+)/.exec(out)?.[1] ?? null
    }
    const { readFile } = await nodeModule<{ readFile(p: string, e: 'utf8'): Promise<string> }>('fs/promises')
    for (const path of ['/etc/machine-id', '/var/lib/dbus/machine-id']) {
      const id = await readFile(path, 'utf8').then((s) => s.trim(), () => '')
      if (id) return id
    }
  } catch {
    // No readable id: the caller falls back to a stored random one.
  }
  return null
}

export async function deriveFingerprint(productId: string | undefined, storage: KeywardStorage): Promise<string> {
  let id = await machineId()
  if (!id) {
    id = await storage.get(DEVICE_ID)
    if (!id) {
      id = `random:${toHex(randomBytes(32))}`
      await storage.set(DEVICE_ID, id)
    }
  }
  return toHex(await sha256(`keyward-fingerprint/v1\n${productId ?? ''}\n${id}`))
}
