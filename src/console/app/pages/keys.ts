import { useEffect, useState } from 'preact/hooks'
import { apiPath, download, get, post, withQuery, type FieldError } from '../api'
import { checks, termInWords } from '../settings'
import { asProblem, Badge, Field, fieldError, FormProblem, html, invalid, LoadError, navigate, num, PageHead, Secret, Spinner, useLoad, useSubmit, when } from '../ui'
import type { Problem } from '../api'
import type { CreatedKey, Key, KeyPage } from '../../../modules/keys/model'
import type { Policy, PolicyList as PolicyListSchema } from '../../../modules/policies/model'
import type { ProductList } from '../../../modules/products/model'

/** The model exports the schema only: its static type is the answer's. */
type PolicyList = (typeof PolicyListSchema)['static']

const PAGE_SIZE = 20

/** `YYYY-MM-DD` from a date input → the end of that UTC day, as the API wants an instant. */
export const endOfDay = (d: string) => (d ? new Date(`${d}T23:59:59Z`).toISOString() : null)

function CreateKey({ products, policies, initialPolicy, onCreated, onCancel }: {
  products: ProductList['data']
  policies: Policy[]
  initialPolicy: Policy | null
  onCreated: () => void
  onCancel: () => void
}) {
  const [productId, setProductId] = useState(initialPolicy?.product_id ?? products[0]?.id ?? '')
  const [policyId, setPolicyId] = useState(initialPolicy?.id ?? '')
  const [plan, setPlan] = useState('')
  const [limit, setLimit] = useState(initialPolicy ? '' : '3')
  const [expires, setExpires] = useState('')
  const [metadata, setMetadata] = useState('')
  const [created, setCreated] = useState<CreatedKey | null>(null)
  const offered = policies.filter((p) => p.product_id === productId)
  const policy = offered.find((p) => p.id === policyId) ?? null
  const choosePolicy = (id: string) => {
    setPolicyId(id)
    // With a policy an empty field inherits its value; without one the key needs its own limit.
    if (id && limit === '3') setLimit('')
    if (!id && limit === '') setLimit('3')
  }
  const { busy, problem, submit } = useSubmit(async () => {
    const errors: FieldError[] = []
    let meta: unknown
    if (metadata.trim()) {
      try {
        meta = JSON.parse(metadata)
      } catch {
        errors.push({ field: 'body.metadata', message: 'Not valid JSON: write an object such as {"customer": "ACME"}.' })
      }
    }
    if (!(policy && limit.trim() === '')) {
      const e = checks.limit(limit, 'body.activation_limit')
      if (e) errors.push(e)
    }
    if (errors.length) invalid(errors)
    return post<CreatedKey>(apiPath`/v1/keys`, {
      product_id: productId,
      ...(policy ? { policy_id: policy.id } : {}),
      ...(plan ? { plan } : {}),
      ...(limit.trim() !== '' ? { activation_limit: Number(limit) } : {}),
      ...(expires ? { expires_at: endOfDay(expires) } : {}),
      ...(meta !== undefined ? { metadata: meta } : {}),
    })
  }, (k) => {
    setCreated(k)
    onCreated()
  })
  if (created) {
    return html`<div class="panel">
      <h2>Key created</h2>
      <${Secret} label="License key" value=${created.key_value} note="Shown once: send it to your customer now. Keyward keeps only a hash and the prefix." />
      <div class="form-actions"><a class="btn primary" href=${`#/keys/${created.id}`}>Open the key</a><button class="btn" type="button" onClick=${onCancel}>Done</button></div>
    </div>`
  }
  if (products.length === 0) return html`<div class="panel"><p>Create a product first: every key belongs to one. <a href="#/products">Products</a></p></div>`
  const fields = ['product_id', 'policy_id', 'plan', 'activation_limit', 'expires_at', 'metadata']
  const term = policy?.duration ? `${termInWords(policy.duration)} ${policy.expiry_basis === 'first_activation' ? 'from its first activation' : 'from today'}` : 'never'
  return html`<form class="panel form" onSubmit=${submit} aria-label="New license key" novalidate>
    <h2>New license key</h2>
    <div class="form-grid">
      <${Field} label="Product" id="key-product" name="product_id" problem=${problem}>
        <select id="key-product" value=${productId} onChange=${(e: Event) => { setProductId((e.target as HTMLSelectElement).value); choosePolicy('') }}>
          ${products.map((p) => html`<option value=${p.id}>${p.name}</option>`)}
        </select>
      </${Field}>
      <${Field} label="Policy" id="key-policy" name="policy_id" problem=${problem}
        hint=${policy ? 'Empty fields below take the policy’s values, and follow its later edits.' : offered.length ? 'The key inherits its settings and entitlements.' : 'This product has no policy yet.'}>
        <select id="key-policy" value=${policyId} onChange=${(e: Event) => choosePolicy((e.target as HTMLSelectElement).value)}>
          <option value="">None</option>
          ${offered.map((p) => html`<option value=${p.id}>${p.name}</option>`)}
        </select>
      </${Field}>
      <${Field} label="Plan (optional)" id="key-plan" name="plan" problem=${problem}>
        <input id="key-plan" maxlength="64" value=${plan} placeholder=${policy ? (policy.plan ? `${policy.plan} (policy)` : 'none (policy)') : 'e.g. pro'} onInput=${(e: Event) => setPlan((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${Field} label="Devices allowed" id="key-limit" name="activation_limit" problem=${problem}>
        <input id="key-limit" type="number" min="1" max="10000" value=${limit} placeholder=${policy ? `${policy.activation_limit} (policy)` : ''} onInput=${(e: Event) => setLimit((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${Field} label="Expires (optional)" id="key-expires" name="expires_at" problem=${problem} hint=${policy ? `End of that day, UTC. Empty: the policy’s term (${term}).` : 'End of that day, UTC. Empty: never.'}>
        <input id="key-expires" type="date" value=${expires} onInput=${(e: Event) => setExpires((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${Field} label="Metadata (optional JSON)" id="key-meta" name="metadata" problem=${problem}>
        <textarea id="key-meta" class="mono" rows="2" placeholder='{"customer": "ACME"}' value=${metadata} onInput=${(e: Event) => setMetadata((e.target as HTMLTextAreaElement).value)}></textarea>
      </${Field}>
    </div>
    <${FormProblem} problem=${problem} fields=${fields} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy}>Create key</button>
      <button class="btn" type="button" onClick=${onCancel}>Cancel</button>
    </div>
  </form>`
}

/**
 * What a customer reads out (`abcde-fghjk…`, any case) → the key_prefix the API matches: upper case,
 * no dashes or spaces, at most 5 characters.
 */
export const toKeyPrefix = (typed: string) => typed.toUpperCase().replace(/[\s-]/g, '').slice(0, 5)
const PREFIX_HELP = 'Key values use only the digits 0-9 and the letters A-Z without I, L, O and U.'

export function Keys({ query }: { query: URLSearchParams }) {
  const [product, setProduct] = useState(query.get('product') ?? '')
  const [status, setStatus] = useState('')
  const [typed, setTyped] = useState('')
  const [prefix, setPrefix] = useState('')
  const [page, setPage] = useState(0)
  // `#/keys?q=…`: the top bar's search (search-box.ts); a new search starts at its first page
  const q = query.get('q') ?? ''
  useEffect(() => setPage(0), [q])
  // `#/keys?policy=pol_…` (a policy's "New key with this policy") opens the form with it chosen.
  const asked = query.get('policy')
  const [creating, setCreating] = useState(!!asked)
  const [exporting, setExporting] = useState<'ndjson' | 'csv' | null>(null)
  const [exportProblem, setExportProblem] = useState<Problem | null>(null)
  const products = useLoad(() => get<ProductList>(apiPath`/v1/products`).catch((): ProductList => ({ data: [] })), [])
  const policies = useLoad(() => get<PolicyList>(apiPath`/v1/policies`).catch((): PolicyList => ({ data: [] })), [])
  const list = useLoad(
    () => get<KeyPage>(withQuery(apiPath`/v1/keys`, { q, product_id: product, status, key_prefix: prefix, page, page_size: PAGE_SIZE })),
    [q, product, status, prefix, page],
  )
  // The search runs a moment after typing stops (or at once on Enter).
  useEffect(() => {
    const next = toKeyPrefix(typed)
    if (next === prefix) return
    const t = setTimeout(() => {
      setPrefix(next)
      setPage(0)
    }, 300)
    return () => clearTimeout(t)
  }, [typed])
  const names = new Map((products.data?.data ?? []).map((p) => [p.id, p.name]))
  if (list.error && !list.data && list.error.status === 403) return html`<${PageHead} title="License keys" /><${LoadError} problem=${list.error} what="list license keys" />`
  // A 400 for the prefix is shown under the search field, in words.
  const prefixProblem =
    list.error?.status === 400 && fieldError(list.error, 'key_prefix') !== null ? { ...list.error, errors: [{ field: 'key_prefix', message: PREFIX_HELP }] } : null
  const d = list.data
  const exportAs = async (format: 'ndjson' | 'csv') => {
    setExporting(format)
    setExportProblem(null)
    try {
      const path = withQuery(apiPath`/v1/keys/export`, { format, q, product_id: product, status, key_prefix: prefix })
      await download(path, `keys-${new Date().toISOString().slice(0, 10)}.${format}`)
    } catch (err) {
      setExportProblem(asProblem(err))
    } finally {
      setExporting(null)
    }
  }
  return html`<${PageHead} title="License keys">
      <a class="btn" href="#/import">Import</a>
      <button class="btn" type="button" disabled=${exporting !== null} onClick=${() => exportAs('csv')} title="Every key matching the filters, as CSV">Export CSV</button>
      <button class="btn" type="button" disabled=${exporting !== null} onClick=${() => exportAs('ndjson')} title="Every key matching the filters, with its devices, as NDJSON">Export NDJSON</button>
      <button class="btn primary" type="button" disabled=${creating} onClick=${() => setCreating(true)}>New key</button>
    </${PageHead}>
    ${exportProblem ? html`<${LoadError} problem=${exportProblem} what="export the keys" />` : null}
    ${creating && products.data && policies.data
      ? html`<${CreateKey} products=${products.data.data} policies=${policies.data.data} initialPolicy=${policies.data.data.find((p) => p.id === asked) ?? null}
          onCreated=${list.reload} onCancel=${() => setCreating(false)} />`
      : null}
    ${q
      ? html`<p class="search-for" role="status">Keys matching “<strong class="break">${q}</strong>”: id, external id or customer id, key start, customer e-mail or name.
          <a href="#/keys">Clear the search</a></p>`
      : null}
    <form class="filters" role="search" aria-label="Filter the keys" onSubmit=${(e: Event) => { e.preventDefault(); setPrefix(toKeyPrefix(typed)); setPage(0) }}>
      <${Field} label="Key starts with" id="f-prefix" name="key_prefix" problem=${prefixProblem}>
        <input id="f-prefix" type="search" class="mono" value=${typed} placeholder="ABCDE" autocomplete="off" spellcheck=${false} maxlength="29"
          aria-describedby=${prefixProblem ? 'f-prefix-error' : undefined}
          onInput=${(e: Event) => setTyped((e.target as HTMLInputElement).value)} />
      </${Field}>
      <div class="field inline-field">
        <label for="f-product">Product</label>
        <select id="f-product" value=${product} onChange=${(e: Event) => { setProduct((e.target as HTMLSelectElement).value); setPage(0) }}>
          <option value="">All</option>
          ${(products.data?.data ?? []).map((p) => html`<option value=${p.id}>${p.name}</option>`)}
        </select>
      </div>
      <div class="field inline-field">
        <label for="f-status">Status</label>
        <select id="f-status" value=${status} onChange=${(e: Event) => { setStatus((e.target as HTMLSelectElement).value); setPage(0) }}>
          <option value="">All</option><option value="active">Active</option><option value="suspended">Suspended</option><option value="revoked">Revoked</option><option value="expired">Expired</option>
        </select>
      </div>
    </form>
    ${list.error && !prefixProblem ? html`<${LoadError} problem=${list.error} what="list license keys" />` : null}
    ${!d
      ? list.error ? null : html`<${Spinner} />`
      : d.data.length === 0
        ? html`<div class="panel empty"><p>${
            q ? `No key matches “${q}”${prefix || product || status ? ' among these filters' : ''}.`
            : prefix ? `No key starts with ${prefix}${product || status ? ' among these filters' : ''}.` : 'No key matches these filters.'}</p></div>`
        : html`<div class="table-wrap"><table class="table">
            <thead><tr><th>Key</th><th>Customer</th><th class="hide-s">Product</th><th>Status</th><th class="num">Devices</th><th class="hide-s">Expires</th><th class="hide-s">Created</th></tr></thead>
            <tbody>${d.data.map(
              (k) => html`<tr>
                <td><a class="mono" href=${`#/keys/${k.id}`} aria-label=${`Key ${k.key_prefix}…`}>${k.key_prefix}…</a>${k.plan ? html` <span class="muted small">${k.plan}</span>` : null}</td>
                <td class="customer-cell">${customerCell(k.customer)}</td>
                <td class="hide-s">${names.get(k.product_id) ?? html`<span class="mono small">${k.product_id}</span>`}</td>
                <td><${Badge} status=${k.status} /></td>
                <td class="num">${k.activations_used} / ${k.activation_limit}</td>
                <td class="hide-s">${k.expires_at ? when(k.expires_at) : 'Never'}</td>
                <td class="hide-s">${when(k.created_at)}</td>
              </tr>`,
            )}</tbody>
          </table></div>
          <nav class="pager" aria-label="Pages">
            <button class="btn small" type="button" disabled=${page === 0} onClick=${() => setPage(page - 1)}>Previous</button>
            <span>${num(d.page * d.page_size + 1)}–${num(d.page * d.page_size + d.data.length)} of ${num(d.total)}</span>
            <button class="btn small" type="button" disabled=${!d.has_more} onClick=${() => setPage(page + 1)}>Next</button>
          </nav>`}`
}

/** A key's customer in a list: the name (else the e-mail, else the id), the e-mail under a name. */
function customerCell(c: Key['customer']) {
  if (!c) return html`<span class="muted">—</span>`
  const main = c.name ?? c.email ?? c.external_id
  return html`${main}${c.name && c.email ? html`<span class="muted small">${c.email}</span>` : null}`
}

export function goToKey(id: string) {
  navigate(`#/keys/${id}`)
}
