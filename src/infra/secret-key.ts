// SECRET_KEY: configured (required with an external database), or in embedded mode generated once
// and kept under DATA_DIR so restarts can still decrypt what was sealed before.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { parseSecretKey, type Config } from '../config'

export function resolveSecretKey(config: Config): Uint8Array {
  if (config.secretKey) return config.secretKey
  mkdirSync(config.dataDir, { recursive: true })
  const file = join(config.dataDir, 'secret.key')
  if (!existsSync(file)) {
    writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600 })
    chmodSync(file, 0o600)
  }
  return parseSecretKey(readFileSync(file, 'utf8').trim())
}
