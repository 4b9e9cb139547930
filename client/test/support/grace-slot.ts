import { createHash } from 'node:crypto'

/** The storage name of a key's stored answer (src/grace.ts): `answer:` + 32 hex of SHA-256 over product and key. */
export function graceSlot(key: string, productId = ''): string {
  const normalized = key.trim().toUpperCase().replace(/-/g, '')
  return `answer:${createHash('sha256').update(`keyward-grace/v1\n${productId}\n${normalized}`).digest('hex').slice(0, 32)}`
}
