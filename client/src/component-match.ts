// The machine-identity rule, as the service applies it (docs/integrating.md, "Identifying machines"):
// the client's own copy, since the package imports nothing from the service. verifyLicense uses it on
// an offline license that carries `components` and `component_match`; the same cases as the service's
// tests hold for it (client/test/component-match.test.ts).

/** The rule a key or policy sets; `off` stores components but never changes an answer. */
export const COMPONENT_MATCH = ['off', 'any', 'two', 'most', 'all'] as const
export type ComponentMatch = (typeof COMPONENT_MATCH)[number]

/** `{name: hash}`: 1..16 entries, names `^[a-z][a-z0-9_.-]{0,31}$`, hashes 64 hex (a salted SHA-256). */
export type Components = Readonly<Record<string, string>>

export const MAX_COMPONENTS = 16
export const COMPONENT_NAME = /^[a-z][a-z0-9_.-]{0,31}$/
export const COMPONENT_HASH = /^[0-9a-fA-F]{64}$/

/** The components with hashes lower-cased, null when omitted, or a problem naming the field (as the service's 400). */
export function parseComponents(value: unknown): { ok: true; components: Components | null } | { ok: false; field: string; detail: string } {
  if (value === null || value === undefined) return { ok: true, components: null }
  if (typeof value !== 'object' || Array.isArray(value)) return { ok: false, field: 'components', detail: 'must be an object of {name: hash}' }
  const names = Object.keys(value)
  if (names.length < 1 || names.length > MAX_COMPONENTS) return { ok: false, field: 'components', detail: `must have 1 to ${MAX_COMPONENTS} entries` }
  const out: Record<string, string> = {}
  for (const name of names) {
    if (!COMPONENT_NAME.test(name)) return { ok: false, field: 'components', detail: `name ${JSON.stringify(name.slice(0, 40))} must match ${COMPONENT_NAME.source}` }
    const hash = (value as Record<string, unknown>)[name]
    if (typeof hash !== 'string' || !COMPONENT_HASH.test(hash)) return { ok: false, field: `components.${name}`, detail: 'must be 64 hexadecimal characters (a SHA-256)' }
    out[name] = hash.toLowerCase()
  }
  return { ok: true, components: out }
}

/** m: the names present in both with equal hashes. */
export function matchingCount(stored: Components, sent: Components): number {
  let m = 0
  for (const name in stored) if (sent[name] !== undefined && sent[name].toLowerCase() === stored[name].toLowerCase()) m++
  return m
}

/**
 * Whether `sent` matches `stored` under `rule` (n = the names stored): any m ≥ 1; two m ≥ min(2, n);
 * most m > n/2; all m = n. Nothing stored matches nothing; `off` matches nothing (it decides no answer).
 */
export function componentsMatch(rule: ComponentMatch, stored: Components | null, sent: Components | null): boolean {
  if (rule === 'off' || stored === null || sent === null) return false
  const n = Object.keys(stored).length
  if (n === 0) return false
  const m = matchingCount(stored, sent)
  switch (rule) {
    case 'any':
      return m >= 1
    case 'two':
      return m >= Math.min(2, n)
    case 'most':
      return m > n / 2
    case 'all':
      return m === n
  }
}

export const isComponentMatch = (v: unknown): v is ComponentMatch => typeof v === 'string' && (COMPONENT_MATCH as readonly string[]).includes(v)
