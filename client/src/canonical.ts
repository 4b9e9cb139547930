// RFC 8785 (JSON Canonicalization Scheme) for the shapes the service signs as JSON (the key set of
// docs/api.md, "Signing keys"): objects, arrays, strings, null, booleans and integers. Members sorted by
// their names' UTF-16 code units (JavaScript's default sort), no whitespace, strings and numbers as
// ECMAScript's JSON.stringify writes them, which is what RFC 8785 prescribes. Written here because the
// package has no runtime dependencies; a test in the repository checks it against the server's.

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('canonical JSON has no NaN or Infinity')
    return JSON.stringify(value)
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>
    const members = Object.keys(record)
      .filter((name) => record[name] !== undefined)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonicalJson(record[name])}`)
    return `{${members.join(',')}}`
  }
  throw new TypeError(`canonical JSON cannot hold a ${typeof value}`)
}
