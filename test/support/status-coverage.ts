// Compares the statuses the tests saw on each operation with the statuses the OpenAPI document lists.

export interface Call {
  method: string
  path: string
  status: number
}

type Doc = { paths?: Record<string, Record<string, { responses?: Record<string, unknown> }>> }

interface Template {
  key: string
  method: string
  pattern: RegExp
  params: number
  statuses: Set<string>
}

function templates(doc: Doc): Template[] {
  const out: Template[] = []
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, op] of Object.entries(item)) {
      const source = path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')
      out.push({
        key: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        pattern: new RegExp(`^${source}$`),
        params: (path.match(/\{/g) ?? []).length,
        statuses: new Set(Object.keys(op.responses ?? {})),
      })
    }
  }
  // A static path wins over a template that would also match it.
  return out.sort((a, b) => a.params - b.params)
}

/** `["GET /v1/keys/{id} 400", ...]`: each status seen on an operation that its documentation leaves out, once. */
export function undocumented(doc: Doc, calls: readonly Call[]): string[] {
  const all = templates(doc)
  const missing = new Set<string>()
  for (const call of calls) {
    const bare = call.path.split('?')[0]!.replace(/(.)\/$/, '$1')
    const op = all.find((t) => t.method === call.method.toUpperCase() && t.pattern.test(bare))
    if (op && !op.statuses.has(String(call.status))) missing.add(`${op.key} ${call.status}`)
  }
  return [...missing].sort()
}
