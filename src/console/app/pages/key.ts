import { useState } from 'preact/hooks'
import { ApiError, del, get, patch, post, type FieldError } from '../api'
import { Badge, Field, FormProblem, html, LoadError, PageHead, Spinner, useLoad, useSubmit, when } from '../ui'
import { endOfDay, type LicenseKey } from './keys'
import type { Product } from './products'

interface Activation {
  id: string
  device_fingerprint: string
  device_name?: string | null
  app_version: string | null
  country: string | null
  status: 'active' | 'deactivated'
  activated_at: string
  last_validated_at: string | null
  deactivated_at: string | null
  deactivation_reason: string | null
}
type KeyDetail = LicenseKey & {
  activations: Activation[]
  release_after_seconds: number | null
  deactivations_allowed: number | null
  deactivations_used: number
}

const short = (fp: string) => `${fp.slice(0, 12)}…`

/** Release-after in the largest unit that divides it: 86400 → 1 day. */
const UNITS = [
  { name: 'days', seconds: 86400 },
  { name: 'hours', seconds: 3600 },
  { name: 'minutes', seconds: 60 },
] as const
type Unit = (typeof UNITS)[number]['name']
function splitSeconds(s: number | null): { amount: string; unit: Unit } {
  if (s === null) return { amount: '', unit: 'days' }
  const u = UNITS.find((x) => s % x.seconds === 0) ?? UNITS[2]
  return { amount: String(s / u.seconds), unit: u.name }
}
const inWords = (s: number | null) => {
  if (s === null) return 'Kept until released'
  const { amount, unit } = splitSeconds(s)
  return `Released after ${amount} ${Number(amount) === 1 ? unit.slice(0, -1) : unit}`
}

/** Field errors found in the browser, in the API's own form, so they sit where the API's would. */
function invalid(errors: FieldError[]): never {
  throw new ApiError({ status: 400, code: 'invalid_request', detail: errors.map((e) => `${e.field}: ${e.message}`).join('; '), errors })
}

/** PATCH /v1/keys/:id: the settings a key keeps after creation. Only changed values are sent. */
function Settings({ k, onDone }: { k: KeyDetail; onDone: () => void }) {
  const release = splitSeconds(k.release_after_seconds)
  const metaText = (m: Record<string, unknown> | null) => (m && Object.keys(m).length ? JSON.stringify(m, null, 2) : '')
  const [plan, setPlan] = useState(k.plan ?? '')
  const [limit, setLimit] = useState(String(k.activation_limit))
  const [amount, setAmount] = useState(release.amount)
  const [unit, setUnit] = useState<Unit>(release.unit)
  const [deact, setDeact] = useState(k.deactivations_allowed === null ? '' : String(k.deactivations_allowed))
  const [meta, setMeta] = useState(metaText(k.metadata))
  const [saved, setSaved] = useState(false)
  const body = () => {
    const errors: FieldError[] = []
    const out: Record<string, unknown> = {}
    if ((plan.trim() || null) !== k.plan) out.plan = plan.trim() || null
    if (limit.trim() !== String(k.activation_limit)) out.activation_limit = limit.trim() === '' ? NaN : Number(limit)
    // The API's own message for these two (a number or null) names no range: the browser says it first.
    const seconds = amount.trim() === '' ? null : Math.round(Number(amount) * UNITS.find((u) => u.name === unit)!.seconds)
    if (seconds !== null && !(seconds >= 60 && seconds <= 31536000)) {
      errors.push({ field: 'body.release_after_seconds', message: 'From 1 minute to 365 days, or empty for never.' })
    } else if (seconds !== k.release_after_seconds) out.release_after_seconds = seconds
    const allowed = deact.trim() === '' ? null : Number(deact)
    if (allowed !== null && !(Number.isInteger(allowed) && allowed >= 0 && allowed <= 10000)) {
      errors.push({ field: 'body.deactivations_allowed', message: 'A whole number from 0 to 10000, or empty for unlimited.' })
    } else if (allowed !== k.deactivations_allowed) out.deactivations_allowed = allowed
    if (meta.trim() !== metaText(k.metadata).trim()) {
      try {
        out.metadata = meta.trim() ? JSON.parse(meta) : {}
      } catch {
        errors.push({ field: 'body.metadata', message: 'Not valid JSON: write an object such as {"customer": "ACME"}, or leave it empty.' })
      }
    }
    if (errors.length) invalid(errors)
    return out
  }
  const { busy, problem, submit } = useSubmit(async () => {
    const changes = body()
    return Object.keys(changes).length ? patch<LicenseKey>(`/v1/keys/${k.id}`, changes) : null
  }, (updated) => {
    // The form shows what the API stored (e.g. the metadata as it formats it).
    if (updated) setMeta(metaText(updated.metadata))
    setSaved(true)
    onDone()
  })
  const edit = (set: (v: string) => void) => (e: Event) => {
    setSaved(false)
    set((e.target as HTMLInputElement).value)
  }
  const fields = ['plan', 'activation_limit', 'release_after_seconds', 'deactivations_allowed', 'metadata']
  return html`<form class="panel form" onSubmit=${submit} aria-labelledby="settings-h" novalidate>
    <h2 id="settings-h">Settings</h2>
    <div class="form-grid pairs">
      <${Field} label="Plan" id="set-plan" name="plan" problem=${problem} hint="Free text your application reads, e.g. pro. Empty: none.">
        <input id="set-plan" maxlength="64" value=${plan} onInput=${edit(setPlan)} />
      </${Field}>
      <${Field} label="Devices allowed" id="set-limit" name="activation_limit" problem=${problem} hint=${`${k.activations_used} in use. Lowering it releases no device.`}>
        <input id="set-limit" type="number" inputmode="numeric" min="1" max="10000" value=${limit} onInput=${edit(setLimit)} />
      </${Field}>
      <${Field} label="Release an inactive device after" id="set-release" name="release_after_seconds" problem=${problem}
        hint="A device that has not validated for this long frees its seat (1 minute to 365 days). Empty: never.">
        <div class="input-unit">
          <input id="set-release" type="number" inputmode="decimal" min="0" step="any" value=${amount} placeholder="Never" onInput=${edit(setAmount)} />
          <label class="sr-only" for="set-release-unit">Unit</label>
          <select id="set-release-unit" value=${unit} onChange=${edit((v) => setUnit(v as Unit))}>
            ${UNITS.map((u) => html`<option value=${u.name}>${u.name}</option>`)}
          </select>
        </div>
      </${Field}>
      <${Field} label="Device releases allowed to the key holder" id="set-deact" name="deactivations_allowed" problem=${problem}
        hint=${`How many devices the holder may release from their app (0: none; empty: no limit). Used so far: ${k.deactivations_used}. Releases made here do not count.`}>
        <input id="set-deact" type="number" inputmode="numeric" min="0" max="10000" value=${deact} placeholder="Unlimited" onInput=${edit(setDeact)} />
      </${Field}>
    </div>
    <${Field} label="Metadata (JSON object)" id="set-meta" name="metadata" problem=${problem} hint="Replaces the whole object. Empty: {}.">
      <textarea id="set-meta" class="mono" rows=${Math.min(10, Math.max(3, meta.split('\n').length))} placeholder='{"customer": "ACME"}' value=${meta} onInput=${edit(setMeta)}></textarea>
    </${Field}>
    <${FormProblem} problem=${problem} fields=${fields} />
    ${saved && !busy ? html`<p class="ok" role="status">Settings saved. Every node uses them from now on.</p>` : null}
    <div class="form-actions"><button class="btn primary" type="submit" disabled=${busy}>Save settings</button></div>
  </form>`
}

function Revoke({ k, onDone }: { k: KeyDetail; onDone: () => void }) {
  const [reason, setReason] = useState('')
  const { busy, problem, submit } = useSubmit(() => post(`/v1/keys/${k.id}/revoke`, reason ? { reason } : {}), onDone)
  if (k.status === 'revoked') return null
  return html`<form class="panel form" onSubmit=${(e: Event) => { e.preventDefault(); if (confirm('Revoke this key? Revoking is final: every device stops validating at once.')) submit() }} aria-label="Revoke">
    <h2>Revoke</h2>
    <${Field} label="Reason (optional)" id="revoke-reason" name="reason" problem=${problem}>
      <input id="revoke-reason" maxlength="500" value=${reason} placeholder="e.g. refund" onInput=${(e: Event) => setReason((e.target as HTMLInputElement).value)} />
    </${Field}>
    <${FormProblem} problem=${problem} fields=${['reason']} />
    <button class="btn danger" type="submit" disabled=${busy}>Revoke key</button>
  </form>`
}

function Extend({ k, onDone }: { k: KeyDetail; onDone: () => void }) {
  const [date, setDate] = useState(k.expires_at ? k.expires_at.slice(0, 10) : '')
  const [perpetual, setPerpetual] = useState(false)
  const { busy, problem, submit } = useSubmit(() => post(`/v1/keys/${k.id}/extend`, { expires_at: perpetual ? null : endOfDay(date) }), onDone)
  if (k.status === 'revoked') return null
  return html`<form class="panel form" onSubmit=${submit} aria-label="Extend">
    <h2>Extend</h2>
    <${Field} label="Expires at the end of" id="extend-date" name="expires_at" problem=${problem} hint="UTC. An expired key becomes active again.">
      <input id="extend-date" type="date" required=${!perpetual} disabled=${perpetual} value=${date} onInput=${(e: Event) => setDate((e.target as HTMLInputElement).value)} />
    </${Field}>
    <label class="check"><input type="checkbox" checked=${perpetual} onChange=${(e: Event) => setPerpetual((e.target as HTMLInputElement).checked)} /> Never expires</label>
    <${FormProblem} problem=${problem} fields=${['expires_at']} />
    <button class="btn" type="submit" disabled=${busy}>Save expiry</button>
  </form>`
}

function Offline({ k }: { k: KeyDetail }) {
  const [fp, setFp] = useState(k.activations.find((a) => a.status === 'active')?.device_fingerprint ?? '')
  const [days, setDays] = useState('30')
  const [issued, setIssued] = useState<{ id: string; license: string; expires_at: string } | null>(null)
  const { busy, problem, submit } = useSubmit(
    () => post<{ id: string; license: string; expires_at: string }>(`/v1/keys/${k.id}/offline-licenses`, { device_fingerprint: fp.trim().toLowerCase(), ttl_seconds: Math.round(Number(days) * 86400) }),
    setIssued,
  )
  const download = () => {
    if (!issued) return
    const a = document.createElement('a')
    a.href = URL.createObjectURL(new Blob([issued.license + '\n'], { type: 'text/plain' }))
    a.download = `${issued.id}.lic`
    document.body.append(a)
    a.click()
    a.remove()
    setTimeout(() => URL.revokeObjectURL(a.href), 1000)
  }
  if (k.status !== 'active') return null
  return html`<form class="panel form" onSubmit=${submit} aria-label="Offline license">
    <h2>Offline license</h2>
    <p class="muted small">For a device that cannot reach this service. The device takes a slot like a validate.</p>
    <${Field} label="Device fingerprint (64 hex characters)" id="off-fp" name="device_fingerprint" problem=${problem}>
      <input id="off-fp" class="mono" required value=${fp} onInput=${(e: Event) => setFp((e.target as HTMLInputElement).value)} />
    </${Field}>
    <${Field} label="Valid for (days)" id="off-days" name="ttl_seconds" problem=${problem}>
      <input id="off-days" type="number" min="1" max="365" value=${days} onInput=${(e: Event) => setDays((e.target as HTMLInputElement).value)} />
    </${Field}>
    <${FormProblem} problem=${problem} fields=${['device_fingerprint', 'ttl_seconds']} />
    <button class="btn" type="submit" disabled=${busy}>Issue license</button>
    ${issued
      ? html`<div class="issued">
          <label for="off-text">License (valid until ${when(issued.expires_at)})</label>
          <textarea id="off-text" class="mono" rows="6" readonly>${issued.license}</textarea>
          <button class="btn primary" type="button" onClick=${download}>Download ${issued.id}.lic</button>
        </div>`
      : null}
  </form>`
}

function Devices({ k, onChange }: { k: KeyDetail; onChange: () => void }) {
  const [problem, setProblem] = useState<string | null>(null)
  const release = async (a: Activation) => {
    setProblem(null)
    try {
      await del(`/v1/keys/${k.id}/activations/${a.id}`)
      onChange()
    } catch (err) {
      setProblem((err as { problem?: { detail: string } }).problem?.detail ?? String(err))
    }
  }
  const active = k.activations.filter((a) => a.status === 'active')
  const past = k.activations.filter((a) => a.status !== 'active').reverse()
  return html`<section class="panel" aria-labelledby="dev-h">
      <h2 id="dev-h">Devices <span class="muted">(${active.length} of ${k.activation_limit})</span></h2>
      ${problem ? html`<p class="alert" role="alert">${problem}</p>` : null}
      ${active.length === 0
        ? html`<p class="muted">No device holds this key right now.</p>`
        : html`<div class="table-wrap"><table class="table">
            <thead><tr><th>Device</th><th class="hide-s">Version</th><th class="hide-s">Country</th><th>Last seen</th><th><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>${active.map(
              (a) => html`<tr>
                <td><span class="mono" title=${a.device_fingerprint}>${a.device_name ? a.device_name : short(a.device_fingerprint)}</span></td>
                <td class="hide-s">${a.app_version ?? '—'}</td>
                <td class="hide-s">${a.country ?? '—'}</td>
                <td>${when(a.last_validated_at ?? a.activated_at)}</td>
                <td class="row-actions"><button class="btn small" type="button" onClick=${() => release(a)} aria-label=${`Release device ${short(a.device_fingerprint)}`}>Release</button></td>
              </tr>`,
            )}</tbody></table></div>`}
    </section>
    <section class="panel" aria-labelledby="hist-h">
      <h2 id="hist-h">Activation history</h2>
      ${k.activations.length === 0
        ? html`<p class="muted">No activation yet.</p>`
        : html`<ol class="timeline">
            ${[...active.slice().reverse(), ...past].map(
              (a) => html`<li>
                <span class="mono">${short(a.device_fingerprint)}</span> activated ${when(a.activated_at)}${a.country ? ` from ${a.country}` : ''}
                ${a.status === 'deactivated' ? html` · released ${when(a.deactivated_at)} <span class="badge">${a.deactivation_reason}</span>` : html` · <${Badge} status="active" />`}
              </li>`,
            )}
          </ol>`}
    </section>`
}

export function KeyPage({ id }: { id: string }) {
  const key = useLoad(() => get<KeyDetail>(`/v1/keys/${id}`), [id])
  const product = useLoad(async () => (key.data ? get<Product>(`/v1/products/${key.data.product_id}`).catch(() => null) : null), [key.data?.product_id])
  if (key.error) return html`<${PageHead} title="License key" /><${LoadError} problem=${key.error} what="read license keys" />`
  const k = key.data
  if (!k) return html`<${PageHead} title="License key" /><${Spinner} />`
  return html`<p class="crumbs"><a href="#/keys">License keys</a> /</p>
    <${PageHead} title=${`Key ${k.key_prefix}…`}>
      <${Badge} status=${k.status} />
      <a class="btn" href=${`#/activity?resource_id=${k.id}`}>Activity</a>
    </${PageHead}>
    <section class="panel" aria-labelledby="about-h">
      <h2 id="about-h">About this key</h2>
      <dl class="props">
        <div><dt>Product</dt><dd>${product.data?.name ?? html`<span class="mono">${k.product_id}</span>`}</dd></div>
        <div><dt>Plan</dt><dd>${k.plan ?? '—'}</dd></div>
        <div><dt>Expires</dt><dd>${k.expires_at ? when(k.expires_at) : 'Never'}</dd></div>
        <div><dt>Created</dt><dd>${when(k.created_at)}</dd></div>
        ${k.revoked_at ? html`<div><dt>Revoked</dt><dd>${when(k.revoked_at)}${k.revoke_reason ? ` (${k.revoke_reason})` : ''}</dd></div>` : null}
        <div><dt>Devices</dt><dd>${k.activations_used} of ${k.activation_limit}</dd></div>
        <div><dt>Inactive devices</dt><dd>${inWords(k.release_after_seconds)}</dd></div>
        <div><dt>Released by the holder</dt><dd>${k.deactivations_allowed === null ? `${k.deactivations_used} (no limit)` : `${k.deactivations_used} of ${k.deactivations_allowed} allowed`}</dd></div>
        <div class="wide"><dt>Id</dt><dd class="mono">${k.id}</dd></div>
      </dl>
    </section>
    <${Devices} k=${k} onChange=${key.reload} />
    <${Settings} k=${k} onDone=${key.reload} />
    <div class="grid-2">
      <${Extend} k=${k} onDone=${key.reload} />
      <${Revoke} k=${k} onDone=${key.reload} />
    </div>
    <${Offline} k=${k} />`
}
