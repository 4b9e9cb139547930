import { useState } from 'preact/hooks'
import { del, get, post } from '../api'
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
type KeyDetail = LicenseKey & { activations: Activation[] }

const short = (fp: string) => `${fp.slice(0, 12)}…`

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
    <${PageHead} title=${`Key ${k.key_prefix}…`}><${Badge} status=${k.status} /></${PageHead}>
    <section class="panel" aria-labelledby="set-h">
      <h2 id="set-h">Settings</h2>
      <dl class="props">
        <div><dt>Product</dt><dd>${product.data?.name ?? html`<span class="mono">${k.product_id}</span>`}</dd></div>
        <div><dt>Plan</dt><dd>${k.plan ?? '—'}</dd></div>
        <div><dt>Devices allowed</dt><dd>${k.activation_limit}</dd></div>
        <div><dt>Expires</dt><dd>${k.expires_at ? when(k.expires_at) : 'Never'}</dd></div>
        <div><dt>Created</dt><dd>${when(k.created_at)}</dd></div>
        ${k.revoked_at ? html`<div><dt>Revoked</dt><dd>${when(k.revoked_at)}${k.revoke_reason ? ` (${k.revoke_reason})` : ''}</dd></div>` : null}
        <div><dt>Id</dt><dd class="mono">${k.id}</dd></div>
        ${k.metadata && Object.keys(k.metadata).length ? html`<div class="wide"><dt>Metadata</dt><dd><pre class="mono">${JSON.stringify(k.metadata, null, 2)}</pre></dd></div>` : null}
      </dl>
    </section>
    <${Devices} k=${k} onChange=${key.reload} />
    <div class="grid-2">
      <${Extend} k=${k} onDone=${key.reload} />
      <${Revoke} k=${k} onDone=${key.reload} />
    </div>
    <${Offline} k=${k} />`
}
