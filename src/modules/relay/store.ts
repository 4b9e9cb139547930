// The relay's own store: one folder (`--data`) holding its key pair (relay.key, PKCS#8 PEM, mode 0600)
// and a bun:sqlite database (relay.db, mode 0600) with the license, the pinned root, the key value's
// hash, the admin token's hash, the check-in state and the leases. bun:sqlite is built into Bun, so
// it compiles into the one executable with nothing beside it (docs/decisions.md, "The relay's store").
// WAL with synchronous=NORMAL: a committed write survives the process being killed (kill -9); only
// a power loss may lose the last transactions, as any WAL database.
import { Database } from 'bun:sqlite'
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { rawPublicKey } from '../signing/keys'

export interface StoredLease {
  fingerprint: string
  name: string | null
  appVersion: string | null
  since: number
  /** Until when the lease holds on disk: the last renewal written + lease_seconds + the slack (leases.ts). */
  until: number
}

export interface RelayKeyPair {
  privateKey: KeyObject
  publicKey: KeyObject
  /** base64url (no padding) of the raw 32 bytes, as the request code and the license carry it */
  publicKeyB64url: string
}

const SCHEMA = `
create table if not exists meta (k text primary key, v text not null);
create table if not exists leases (
  fingerprint text primary key,
  name text,
  app_version text,
  since integer not null,
  until integer not null
);`

export class RelayStore {
  readonly db: Database
  private readonly upsertLease
  private readonly renewLease
  private readonly deleteLease
  private readonly setMeta
  private readonly getMeta

  private constructor(readonly dir: string) {
    const file = join(dir, 'relay.db')
    this.db = new Database(file, { create: true, strict: true })
    chmodSync(file, 0o600)
    this.db.exec('pragma journal_mode = wal; pragma synchronous = normal; pragma busy_timeout = 5000;')
    this.db.exec(SCHEMA)
    this.upsertLease = this.db.prepare(
      'insert into leases (fingerprint, name, app_version, since, until) values ($fingerprint, $name, $appVersion, $since, $until) ' +
        'on conflict (fingerprint) do update set name = excluded.name, app_version = excluded.app_version, since = excluded.since, until = excluded.until',
    )
    this.renewLease = this.db.prepare('update leases set until = $until, name = $name, app_version = $appVersion where fingerprint = $fingerprint')
    this.deleteLease = this.db.prepare('delete from leases where fingerprint = $fingerprint')
    this.setMeta = this.db.prepare('insert into meta (k, v) values ($k, $v) on conflict (k) do update set v = excluded.v')
    this.getMeta = this.db.prepare<{ v: string }, { k: string }>('select v from meta where k = $k')
  }

  /** Opens (creating) the data folder; mode 0700 when it is made here. */
  static open(dir: string): RelayStore {
    if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 })
    return new RelayStore(dir)
  }

  /** The relay's Ed25519 key pair, made (and written, mode 0600) on first use. */
  keyPair(): RelayKeyPair {
    const file = join(this.dir, 'relay.key')
    let privateKey: KeyObject
    if (existsSync(file)) privateKey = createPrivateKey(readFileSync(file, 'utf8'))
    else {
      privateKey = generateKeyPairSync('ed25519').privateKey
      // `wx`: two first uses at once cannot both write; the loser reads the winner's key.
      try {
        writeFileSync(file, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600, flag: 'wx' })
      } catch {
        privateKey = createPrivateKey(readFileSync(file, 'utf8'))
      }
    }
    const publicKey = createPublicKey(privateKey)
    return { privateKey, publicKey, publicKeyB64url: rawPublicKey(publicKey).toString('base64url') }
  }

  /**
   * Claims the folder for one serving process (`relay.pid`): two relays on one folder would lease the
   * same seats twice. A pid file left by a killed relay names a process that is gone, and is taken over.
   * Returns the release, or the pid of the live relay that holds the folder.
   */
  claim(): { release(): void } | { heldBy: number } {
    const file = join(this.dir, 'relay.pid')
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        writeFileSync(file, String(process.pid), { flag: 'wx', mode: 0o600 })
        return { release: () => rmSync(file, { force: true }) }
      } catch {
        const pid = Number(readFileSync(file, 'utf8').trim())
        if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) return { heldBy: pid }
        rmSync(file, { force: true })
      }
    }
    return { heldBy: -1 }
  }

  meta(k: string): string | null {
    return this.getMeta.get({ k })?.v ?? null
  }

  setMetas(values: Record<string, string>): void {
    this.db.transaction(() => {
      for (const [k, v] of Object.entries(values)) this.setMeta.run({ k, v })
    })()
  }

  leases(): StoredLease[] {
    return this.db.query<StoredLease, []>('select fingerprint, name, app_version as appVersion, since, until from leases').all()
  }

  writeLease(l: StoredLease): void {
    this.upsertLease.run({ fingerprint: l.fingerprint, name: l.name, appVersion: l.appVersion, since: l.since, until: l.until })
  }

  writeRenewal(l: StoredLease): void {
    this.renewLease.run({ fingerprint: l.fingerprint, name: l.name, appVersion: l.appVersion, until: l.until })
  }

  removeLease(fingerprint: string): void {
    this.deleteLease.run({ fingerprint })
  }

  removeLeases(fingerprints: readonly string[]): void {
    if (fingerprints.length === 0) return
    this.db.transaction(() => {
      for (const fingerprint of fingerprints) this.deleteLease.run({ fingerprint })
    })()
  }

  close(): void {
    this.db.close()
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as { code?: string }).code === 'EPERM' // exists, owned by another user
  }
}
