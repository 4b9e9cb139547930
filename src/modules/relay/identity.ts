// The relay machine's identity, as the request code carries it and the license is bound to: each
// component a SHA-256 of a salted value (no raw serial leaves the machine). The fingerprint follows
// the OS machine id (or KEYWARD_MACHINE_ID in a container, where the host's identity is not visible),
// so a changed hostname or network card does not make the license another machine's.
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { cpus, hostname, networkInterfaces } from 'node:os'
import type { Components } from '../../core/component-match'

const SALT = 'keyward-relay/'
const digest = (name: string, value: string) => createHash('sha256').update(`${SALT}${name}\n${value}`).digest('hex')

function osMachineId(): string | null {
  for (const file of ['/etc/machine-id', '/var/lib/dbus/machine-id']) {
    try {
      if (existsSync(file)) {
        const id = readFileSync(file, 'utf8').trim()
        if (id) return id
      }
    } catch {
      // unreadable: try the next
    }
  }
  return null
}

export interface MachineIdentity {
  fingerprint: string
  components: Components
}

/** `machineId`: KEYWARD_MACHINE_ID when set (a container's identity given by its operator). */
export function machineIdentity(machineId: string | null): MachineIdentity {
  const components: Record<string, string> = {}
  const host = hostname()
  if (machineId !== null) components.container = digest('container', machineId)
  const os = osMachineId()
  if (os !== null) components.machine_id = digest('machine_id', os)
  if (host) components.hostname = digest('hostname', host)
  const cpu = cpus()[0]?.model
  if (cpu) components.cpu = digest('cpu', cpu)
  const macs = Object.values(networkInterfaces())
    .flat()
    .filter((i) => i && !i.internal && i.mac && i.mac !== '00:00:00:00:00:00')
    .map((i) => i!.mac)
  if (macs.length) components.mac = digest('mac', [...new Set(macs)].sort().join(','))
  const basis = machineId ?? os ?? host
  return { fingerprint: createHash('sha256').update(`${SALT}fingerprint\n${basis}`).digest('hex'), components }
}
