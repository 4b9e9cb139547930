// Policies: what a key inherits. The list groups them by product; a policy's page edits it, says what an
// edit changes (inherited settings move for every key of the policy at once; the term only for keys
// created afterwards), edits its entitlements and lists the keys it governs.
import { useState } from 'preact/hooks'
import { apiPath, del, get, patch, post, withQuery, type FieldError } from '../api'
import { parsePeriod } from '../../../core/durations'
import { Entitlements } from '../entitlements'
import { POLICY_CREDIT_FIELDS, PolicyCredits, usePolicyCredits } from '../credits'
import {
  afterExpiryInWords,
  checks,
  graceInWords,
  limitInWords,
  releaseInWords,
  termInWords,
  splitSeconds,
  toSeconds,
  UNITS,
  type Unit,
} from '../settings'
import { Badge, Field, FormProblem, html, invalid, LoadError, navigate, num, PageHead, Spinner, useLoad, useSubmit, when } from '../ui'
import { RULE_HINT, RuleSelect, ruleInWords, type ComponentMatch } from '../component-match'
import type { KeyPage } from '../../../modules/keys/model'
import type { Policy, PolicyList as PolicyListSchema } from '../../../modules/policies/model'
import type { ProductList } from '../../../modules/products/model'
import { KEY_SETTINGS, SETTING_DEFAULTS } from '../../../core/key-settings'

/** The model exports the schema only: its static type is the answer's. */
type PolicyList = (typeof PolicyListSchema)['static']

const basisInWords = (b: Policy['expiry_basis']) => (b === 'first_activation' ? 'from the first activation' : 'from creation')

/** The fields of the form in the API's names, and the ones that move existing keys when edited. */
// what a key inherits is core/key-settings.ts's table; entitlements have their own editor on the page
const INHERITED = KEY_SETTINGS.map((s) => s.field).filter((f) => f !== 'entitlements')
const FOR_NEW_KEYS = ['duration', 'expiry_basis'] as const
const LABELS: Record<string, string> = {
  name: 'Name',
  plan: 'Plan',
  activation_limit: 'Devices allowed',
  duration: 'Term',
  expiry_basis: 'Term starts',
  grace_seconds: 'Grace after expiry',
  after_expiry: 'After expiry',
  release_after_seconds: 'Release an inactive device after',
  deactivations_allowed: 'Device releases allowed to the key holder',
  one_key_per_device: 'One key per device',
  component_match: 'Machine match',
  metadata: 'Metadata',
}

function SecondsInput({ id, amount, unit, onAmount, onUnit, placeholder, unitLabel }: { id: string; amount: string; unit: Unit; unitLabel: string; onAmount: (v: string) => void; onUnit: (u: Unit) => void; placeholder?: string }) {
  return html`<div class="input-unit">
    <input id=${id} type="number" inputmode="decimal" min="0" step="any" value=${amount} placeholder=${placeholder} onInput=${(e: Event) => onAmount((e.target as HTMLInputElement).value)} />
    <label class="sr-only" for=${id + '-unit'}>${unitLabel}</label>
    <select id=${id + '-unit'} value=${unit} onChange=${(e: Event) => onUnit((e.target as HTMLSelectElement).value as Unit)}>
      ${UNITS.map((u) => html`<option value=${u.name}>${u.name}</option>`)}
    </select>
  </div>`
}

/**
 * Create (with a product) or edit a policy. On edit only the changed fields are sent, and before saving
 * the form lists what the change does: to every key of the policy now, or to keys created afterwards.
 */
function PolicyForm({ policy, products, productId, onDone, onCancel }: {
  policy?: Policy
  products?: ProductList['data']
  productId?: string
  onDone: (p: Policy) => void
  onCancel?: () => void
}) {
  const id = policy ? 'pol' : 'new-pol'
  const release = splitSeconds(policy?.release_after_seconds ?? null)
  const grace = splitSeconds(policy?.grace_seconds || null)
  const metaText = (m: Record<string, unknown> | undefined) => (m && Object.keys(m).length ? JSON.stringify(m, null, 2) : '')
  const [product, setProduct] = useState(productId || products?.[0]?.id || '')
  const [name, setName] = useState(policy?.name ?? '')
  const [plan, setPlan] = useState(policy?.plan ?? '')
  const [limit, setLimit] = useState(String(policy?.activation_limit ?? SETTING_DEFAULTS.activation_limit))
  const [duration, setDuration] = useState(policy?.duration ?? '')
  const [basis, setBasis] = useState<Policy['expiry_basis']>(policy?.expiry_basis ?? 'creation')
  const [graceAmount, setGraceAmount] = useState(grace.amount)
  const [graceUnit, setGraceUnit] = useState<Unit>(grace.unit)
  const [after, setAfter] = useState<Policy['after_expiry']>(policy?.after_expiry ?? 'refuse')
  const [releaseAmount, setReleaseAmount] = useState(release.amount)
  const [releaseUnit, setReleaseUnit] = useState<Unit>(release.unit)
  const [deact, setDeact] = useState(policy?.deactivations_allowed == null ? '' : String(policy.deactivations_allowed))
  const [oneKey, setOneKey] = useState(policy?.one_key_per_device ?? false)
  // The machine-identity rule (docs/integrating.md, "Identifying machines"); read as optional until the policy model declares it.
  const [rule, setRule] = useState<ComponentMatch>((policy as { component_match?: ComponentMatch } | undefined)?.component_match ?? 'off')
  const [meta, setMeta] = useState(metaText(policy?.metadata))
  const [saved, setSaved] = useState(false)
  // New policies only: an existing policy's credits have their own form on its page (PolicyCredits).
  const credits = usePolicyCredits(null, () => setSaved(false))

  /** Every field as the API takes it, checked here first; `errors` lists what the browser refuses. */
  const read = () => {
    const errors: FieldError[] = []
    const push = (e: FieldError | null) => e && errors.push(e)
    if (name.trim() === '') errors.push({ field: 'body.name', message: 'A name, e.g. “Pro, yearly”.' })
    push(checks.limit(limit, 'body.activation_limit'))
    const d = duration.trim().toUpperCase()
    if (d !== '') {
      const p = parsePeriod(d)
      if (typeof p === 'string') errors.push({ field: 'body.duration', message: `A term such as P1Y (a year), P1M, P14D or PT12H: it ${p.replace(/^must be /, 'must be ')}.` })
    }
    const graceSeconds = toSeconds(graceAmount, graceUnit) ?? 0
    push(checks.grace(graceSeconds, 'body.grace_seconds'))
    const releaseSeconds = toSeconds(releaseAmount, releaseUnit)
    push(checks.release(releaseSeconds, 'body.release_after_seconds'))
    const allowed = deact.trim() === '' ? null : Number(deact)
    push(checks.deactivations(allowed, 'body.deactivations_allowed'))
    let metadata: unknown = {}
    if (meta.trim()) {
      try {
        metadata = JSON.parse(meta)
      } catch {
        errors.push({ field: 'body.metadata', message: 'Not valid JSON: write an object such as {"tier": "pro"}, or leave it empty.' })
      }
    }
    const all = {
      name: name.trim(),
      plan: plan.trim() || null,
      activation_limit: Number(limit),
      duration: d || null,
      expiry_basis: basis,
      grace_seconds: graceSeconds,
      after_expiry: after,
      release_after_seconds: releaseSeconds,
      deactivations_allowed: allowed,
      one_key_per_device: oneKey,
      component_match: rule,
      metadata,
    }
    return { all, errors }
  }
  /** The fields whose value differs from the policy's (all of them when creating). */
  const changes = () => {
    const { all } = read()
    if (!policy) return all
    const current = policy as Record<string, unknown>
    // A field this node's policies do not have (an older node) is left out rather than sent as a change.
    return Object.fromEntries(
      Object.entries(all).filter(([k, v]) => current[k] !== undefined && JSON.stringify(v) !== JSON.stringify(current[k])),
    ) as Partial<typeof all>
  }
  const { busy, problem, submit } = useSubmit(
    async () => {
      const { errors } = read()
      if (errors.length) invalid(errors)
      if (!policy) return post<Policy>(apiPath`/v1/policies`, { product_id: product, ...changes(), credits: credits.value() })
      const c = changes()
      return Object.keys(c).length ? patch<Policy>(apiPath`/v1/policies/${policy.id}`, c) : policy
    },
    (p) => {
      setSaved(true)
      setMeta(metaText(p.metadata))
      onDone(p)
    },
  )
  const edit = (set: (v: string) => void) => (e: Event) => {
    setSaved(false)
    set((e.target as HTMLInputElement).value)
  }
  const pending = policy ? Object.keys(changes()) : []
  const now = pending.filter((k) => (INHERITED as readonly string[]).includes(k))
  const later = pending.filter((k) => (FOR_NEW_KEYS as readonly string[]).includes(k))
  const fields = ['product_id', 'name', 'plan', 'activation_limit', 'duration', 'expiry_basis', 'grace_seconds', 'after_expiry', 'release_after_seconds', 'deactivations_allowed', 'one_key_per_device', 'component_match', 'metadata', ...(policy ? [] : POLICY_CREDIT_FIELDS)]
  return html`<form class="panel form" onSubmit=${submit} aria-labelledby=${id + '-h'} novalidate>
    <h2 id=${id + '-h'}>${policy ? 'Settings' : 'New policy'}</h2>
    <div class="form-grid pairs">
      ${policy
        ? null
        : html`<${Field} label="Product" id=${id + '-product'} name="product_id" problem=${problem} hint="A policy belongs to one product for good.">
            <select id=${id + '-product'} value=${product} onChange=${(e: Event) => setProduct((e.target as HTMLSelectElement).value)}>
              ${(products ?? []).map((p) => html`<option value=${p.id}>${p.name}</option>`)}
            </select>
          </${Field}>`}
      <${Field} label="Name" id=${id + '-name'} name="name" problem=${problem} hint="What you sell, e.g. “Pro, yearly” or “Trial 14 days”.">
        <input id=${id + '-name'} maxlength="200" value=${name} onInput=${edit(setName)} />
      </${Field}>
      <${Field} label="Plan" id=${id + '-plan'} name="plan" problem=${problem} hint="The label its keys answer as plan, e.g. pro. Empty: none.">
        <input id=${id + '-plan'} maxlength="64" value=${plan} onInput=${edit(setPlan)} />
      </${Field}>
      <${Field} label="Devices allowed" id=${id + '-limit'} name="activation_limit" problem=${problem}>
        <input id=${id + '-limit'} type="number" inputmode="numeric" min="1" max="10000" value=${limit} onInput=${edit(setLimit)} />
      </${Field}>
      <${Field} label="Term (ISO 8601)" id=${id + '-duration'} name="duration" problem=${problem}
        hint=${duration.trim() && typeof parsePeriod(duration.trim().toUpperCase()) !== 'string' ? `${termInWords(duration.trim().toUpperCase())}. Applies to keys created afterwards.` : 'P1Y a year, P1M a month, P14D 14 days, PT12H 12 hours. Empty: perpetual.'}>
        <input id=${id + '-duration'} class="mono" maxlength="64" value=${duration} placeholder="Perpetual" autocomplete="off" spellcheck=${false} onInput=${edit(setDuration)} />
      </${Field}>
      <${Field} label="Term starts" id=${id + '-basis'} name="expiry_basis" problem=${problem} hint="When a new key’s term begins.">
        <select id=${id + '-basis'} value=${basis} onChange=${edit((v) => setBasis(v as Policy['expiry_basis']))}>
          <option value="creation">When the key is created</option>
          <option value="first_activation">At its first activation</option>
        </select>
      </${Field}>
      <${Field} label="Grace after expiry" id=${id + '-grace'} name="grace_seconds" problem=${problem} hint="Validate stays valid this long after the expiry, marked expired. Empty: none.">
        <${SecondsInput} id=${id + '-grace'} unitLabel="Grace counted in" amount=${graceAmount} unit=${graceUnit} placeholder="None"
          onAmount=${(v: string) => { setSaved(false); setGraceAmount(v) }} onUnit=${(u: Unit) => { setSaved(false); setGraceUnit(u) }} />
      </${Field}>
      <${Field} label="After expiry" id=${id + '-after'} name="after_expiry" problem=${problem}>
        <select id=${id + '-after'} value=${after} onChange=${edit((v) => setAfter(v as Policy['after_expiry']))}>
          <option value="refuse">Refuse (the key stops working)</option>
          <option value="keep">Keep working, marked expired (perpetual fallback)</option>
        </select>
      </${Field}>
      <${Field} label="Release an inactive device after" id=${id + '-release'} name="release_after_seconds" problem=${problem} hint="1 minute to 365 days. Empty: never.">
        <${SecondsInput} id=${id + '-release'} unitLabel="Inactivity counted in" amount=${releaseAmount} unit=${releaseUnit} placeholder="Never"
          onAmount=${(v: string) => { setSaved(false); setReleaseAmount(v) }} onUnit=${(u: Unit) => { setSaved(false); setReleaseUnit(u) }} />
      </${Field}>
      <${Field} label="Device releases allowed to the key holder" id=${id + '-deact'} name="deactivations_allowed" problem=${problem} hint="0: none. Empty: no limit.">
        <input id=${id + '-deact'} type="number" inputmode="numeric" min="0" max="10000" value=${deact} placeholder="Unlimited" onInput=${edit(setDeact)} />
      </${Field}>
      <${Field} label="Machine match" id=${id + '-cm'} name="component_match" problem=${problem} hint=${RULE_HINT}>
        <${RuleSelect} id=${id + '-cm'} value=${rule} onChange=${(v: ComponentMatch) => { setSaved(false); setRule(v) }} />
      </${Field}>
    </div>
    <label class="check"><input type="checkbox" id=${id + '-onekey'} checked=${oneKey} onChange=${(e: Event) => { setSaved(false); setOneKey((e.target as HTMLInputElement).checked) }} />
      One key per device: a device that ever held a key of this policy cannot activate another (trials)</label>
    <${Field} label="Metadata (JSON object)" id=${id + '-meta'} name="metadata" problem=${problem} hint="Replaces the whole object. Empty: {}.">
      <textarea id=${id + '-meta'} class="mono" rows="3" placeholder='{"tier": "pro"}' value=${meta} onInput=${edit(setMeta)}></textarea>
    </${Field}>
    ${policy ? null : credits.fields(id + '-credits', problem)}
    ${policy && pending.length
      ? html`<div class="panel notice impact" role="status" aria-label="What this edit changes">
          <strong>What saving changes</strong>
          <ul>
            ${now.length
              ? html`<li>${now.map((k) => LABELS[k]).join(', ')}: at once for ${policy.keys === 1 ? 'the 1 key' : `all ${num(policy.keys)} keys`} of this policy, on every node, except a key that sets its own value.</li>`
              : null}
            ${later.length
              ? html`<li>${later.map((k) => LABELS[k]).join(', ')}: only for keys created from now on. ${policy.keys === 1 ? 'The expiry of the existing key does' : policy.keys === 0 ? 'No key exists yet, so nothing else' : `The expiries of the ${num(policy.keys)} existing keys do`} not move.</li>`
              : null}
            ${pending.filter((k) => k === 'name' || k === 'metadata').length
              ? html`<li>${pending.filter((k) => k === 'name' || k === 'metadata').map((k) => LABELS[k]).join(', ')}: the policy’s own ${pending.includes('name') && pending.includes('metadata') ? 'labels' : 'label'}; validate answers do not change.</li>`
              : null}
          </ul>
        </div>`
      : null}
    <${FormProblem} problem=${problem} fields=${fields} />
    ${saved && !busy && policy ? html`<p class="ok" role="status">Saved. Every node uses the new settings for the keys of this policy.</p>` : null}
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy}>${policy ? 'Save policy' : 'Create policy'}</button>
      ${onCancel ? html`<button class="btn" type="button" onClick=${onCancel}>Cancel</button>` : null}
    </div>
  </form>`
}

function PolicyTable({ policies }: { policies: Policy[] }) {
  return html`<div class="table-wrap"><table class="table">
    <thead><tr><th>Policy</th><th class="hide-s">Plan</th><th class="num">Devices</th><th>Term</th><th class="num hide-s">Entitlements</th><th class="num">Keys</th></tr></thead>
    <tbody>${policies.map(
      (p) => html`<tr>
        <td><a href=${`#/policies/${p.id}`}>${p.name}</a></td>
        <td class="hide-s">${p.plan ?? '—'}</td>
        <td class="num">${p.activation_limit}</td>
        <td>${termInWords(p.duration)}${p.duration && p.expiry_basis === 'first_activation' ? html` <span class="muted small">from first activation</span>` : null}</td>
        <td class="num hide-s">${Object.keys(p.entitlements).length}</td>
        <td class="num"><a href=${`#/policies/${p.id}`} aria-label=${`${p.keys} keys of ${p.name}`}>${num(p.keys)}</a></td>
      </tr>`,
    )}</tbody>
  </table></div>`
}

export function Policies({ query }: { query: URLSearchParams }) {
  const [product, setProduct] = useState(query.get('product') ?? '')
  const [creating, setCreating] = useState(false)
  const products = useLoad(() => get<ProductList>(apiPath`/v1/products`), [])
  const list = useLoad(() => get<PolicyList>(withQuery(apiPath`/v1/policies`, { product_id: product })), [product])
  if (list.error && !list.data) return html`<${PageHead} title="Policies" /><${LoadError} problem=${list.error} what="list policies" />`
  const all = products.data?.data ?? []
  const shown = product ? all.filter((p) => p.id === product) : all
  const data = list.data?.data
  return html`<${PageHead} title="Policies">
      <button class="btn primary" type="button" disabled=${creating || all.length === 0} onClick=${() => setCreating(true)}>New policy</button>
    </${PageHead}>
    <p class="lead muted">A policy is what you sell (“Pro, yearly, 3 devices, with export”): its keys inherit its settings and entitlements, and an edit reaches all of them at once.</p>
    ${creating
      ? html`<${PolicyForm} products=${all} productId=${product} onCancel=${() => setCreating(false)} onDone=${(p: Policy) => navigate(`#/policies/${p.id}`)} />`
      : null}
    <form class="filters" aria-label="Filter the policies" onSubmit=${(e: Event) => e.preventDefault()}>
      <div class="field inline-field">
        <label for="pol-f-product">Product</label>
        <select id="pol-f-product" value=${product} onChange=${(e: Event) => setProduct((e.target as HTMLSelectElement).value)}>
          <option value="">All</option>
          ${all.map((p) => html`<option value=${p.id}>${p.name}</option>`)}
        </select>
      </div>
    </form>
    ${!data || !products.data
      ? products.error ? html`<${LoadError} problem=${products.error} what="list products" />` : html`<${Spinner} />`
      : all.length === 0
        ? html`<div class="panel empty"><p>Create a product first: every policy belongs to one. <a href="#/products">Products</a></p></div>`
        : shown.map((p) => {
            const mine = data.filter((x) => x.product_id === p.id)
            return html`<section class="product-group" aria-labelledby=${`pg-${p.id}`}>
              <h2 id=${`pg-${p.id}`} class="group-head">${p.name} <span class="muted small">${mine.length === 1 ? '1 policy' : `${mine.length} policies`}</span></h2>
              ${mine.length === 0 ? html`<div class="panel empty"><p>No policy for ${p.name} yet.</p></div>` : html`<${PolicyTable} policies=${mine} />`}
            </section>`
          })}`
}

const KEYS_PAGE = 20

/** The keys a policy governs, with what each sets itself. */
function GovernedKeys({ policy }: { policy: Policy }) {
  const [page, setPage] = useState(0)
  const keys = useLoad(() => get<KeyPage>(withQuery(apiPath`/v1/keys`, { policy_id: policy.id, page, page_size: KEYS_PAGE })), [policy.id, policy.updated_at, page])
  const d = keys.data
  return html`<section class="panel" aria-labelledby="gov-h">
    <div class="panel-head">
      <h2 id="gov-h">Keys of this policy <span class="muted">(${num(d?.total ?? policy.keys)})</span></h2>
      <a class="btn small" href=${`#/keys?policy=${policy.id}`}>New key with this policy</a>
    </div>
    ${keys.error
      ? html`<${LoadError} problem=${keys.error} what="list license keys" />`
      : !d
        ? html`<${Spinner} />`
        : d.data.length === 0
          ? html`<p class="muted">No key uses this policy yet.</p>`
          : html`<div class="table-wrap"><table class="table">
              <thead><tr><th>Key</th><th>Status</th><th class="num">Devices</th><th class="hide-s">Expires</th><th>Sets its own</th></tr></thead>
              <tbody>${d.data.map(
                (k) => html`<tr>
                  <td><a class="mono" href=${`#/keys/${k.id}`} aria-label=${`Key ${k.key_prefix}…`}>${k.key_prefix}…</a></td>
                  <td><${Badge} status=${k.status} /></td>
                  <td class="num">${k.activations_used} / ${k.activation_limit}</td>
                  <td class="hide-s">${k.expires_at ? when(k.expires_at) : 'Never'}</td>
                  <td class="small">${Object.keys(k.overrides).length ? Object.keys(k.overrides).map((f) => html`<span class="chip">${LABELS[f] ?? f}</span>`) : html`<span class="muted">nothing</span>`}</td>
                </tr>`,
              )}</tbody>
            </table></div>
            ${d.total > KEYS_PAGE
              ? html`<nav class="pager" aria-label="Pages of keys">
                  <button class="btn small" type="button" disabled=${page === 0} onClick=${() => setPage(page - 1)}>Previous</button>
                  <span>${num(d.page * d.page_size + 1)}–${num(d.page * d.page_size + d.data.length)} of ${num(d.total)}</span>
                  <button class="btn small" type="button" disabled=${!d.has_more} onClick=${() => setPage(page + 1)}>Next</button>
                </nav>`
              : null}`}
  </section>`
}

function DeletePolicy({ policy }: { policy: Policy }) {
  const { busy, problem, submit } = useSubmit(() => del(apiPath`/v1/policies/${policy.id}`), () => navigate('#/policies'))
  const words =
    problem?.code === 'policy_in_use'
      ? `Keys still use ${policy.name}: move them to another policy or delete them first. Nothing was deleted.`
      : problem?.detail
  return html`<section class="panel" aria-labelledby="del-h">
    <h2 id="del-h">Delete</h2>
    <p class="muted">A policy can be deleted once no key uses it.</p>
    ${problem ? html`<p class="alert" role="alert">${words}</p>` : null}
    <button class="btn danger" type="button" disabled=${busy} onClick=${() => { if (confirm(`Delete the policy ${policy.name}?`)) submit() }}>Delete policy</button>
  </section>`
}

export function PolicyPage({ id }: { id: string }) {
  const pol = useLoad(() => get<Policy>(apiPath`/v1/policies/${id}`), [id])
  const product = useLoad(async () => (pol.data ? get<{ name: string }>(apiPath`/v1/products/${pol.data.product_id}`).catch(() => null) : null), [pol.data?.product_id])
  if (pol.error) return html`<p class="crumbs"><a href="#/policies">Policies</a> /</p><${PageHead} title="Policy" /><${LoadError} problem=${pol.error} what="read policies" />`
  const p = pol.data
  if (!p) return html`<${PageHead} title="Policy" /><${Spinner} />`
  return html`<p class="crumbs"><a href="#/policies">Policies</a> /</p>
    <${PageHead} title=${p.name}>
      <a class="btn" href=${`#/activity?resource_id=${p.id}`}>Activity</a>
    </${PageHead}>
    <section class="panel" aria-labelledby="pabout-h">
      <h2 id="pabout-h">What its keys get</h2>
      <dl class="props">
        <div><dt>Product</dt><dd>${product.data?.name ?? html`<span class="mono">${p.product_id}</span>`}</dd></div>
        <div><dt>Plan</dt><dd>${p.plan ?? '—'}</dd></div>
        <div><dt>Devices</dt><dd>${p.activation_limit}</dd></div>
        <div><dt>Term</dt><dd>${termInWords(p.duration)}${p.duration ? `, ${basisInWords(p.expiry_basis)}` : ''}</dd></div>
        <div><dt>Grace after expiry</dt><dd>${graceInWords(p.grace_seconds)}</dd></div>
        <div><dt>After expiry</dt><dd>${afterExpiryInWords(p.after_expiry)}</dd></div>
        <div><dt>Inactive devices</dt><dd>${releaseInWords(p.release_after_seconds)}</dd></div>
        <div><dt>Released by the holder</dt><dd>${limitInWords(p.deactivations_allowed)}</dd></div>
        <div><dt>One key per device</dt><dd>${p.one_key_per_device ? 'Yes' : 'No'}</dd></div>
        <div><dt>Machine match</dt><dd>${ruleInWords((p as { component_match?: ComponentMatch }).component_match)}</dd></div>
        <div><dt>Credits</dt><dd>${p.credits ? `${num(p.credits.initial)} to start` : 'Unmetered'}</dd></div>
        <div><dt>Keys</dt><dd>${num(p.keys)}</dd></div>
        <div class="wide"><dt>Id</dt><dd class="mono">${p.id}</dd></div>
      </dl>
    </section>
    <div class="panel notice" role="note">
      <strong>What an edit changes.</strong> Plan, devices, grace, after expiry, device releases, one key per device
      and entitlements reach every key of this policy at once, on every node, unless a key sets its own value.
      The term (and when it starts) applies only to keys created afterwards: existing expiries do not move.
    </div>
    <${PolicyForm} policy=${p} onDone=${pol.reload} />
    <${PolicyCredits} p=${p} onDone=${pol.reload} />
    <${Entitlements} noun="policy" own=${p.entitlements} inherited=${null}
      save=${(next: Record<string, unknown>) => patch(apiPath`/v1/policies/${p.id}`, { entitlements: next })} onSaved=${pol.reload} />
    <${GovernedKeys} policy=${p} />
    <${DeletePolicy} policy=${p} />`
}
