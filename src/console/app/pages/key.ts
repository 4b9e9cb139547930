import { useEffect, useRef, useState } from 'preact/hooks'
import { apiPath, del, get, patch, post, type FieldError, type Problem } from '../api'
import { Entitlements, showValue, type Own } from '../entitlements'
import { afterExpiryInWords, checks, graceInWords, limitInWords, releaseInWords, splitSeconds, termInWords, toSeconds, UNITS, type Unit } from '../settings'
import { asProblem, Badge, Field, FormProblem, html, invalid, LoadError, PageHead, Secret, Spinner, useLoad, useSubmit, when } from '../ui'
import type { Activation } from '../../../modules/activations/model'
import type { CreatedKey, Key, KeyDetail, Resettable } from '../../../modules/keys/model'
import type { IssuedLicense } from '../../../modules/offline/model'
import type { Policy } from '../../../modules/policies/model'
import type { Product } from '../../../modules/products/model'
import { endOfDay } from './keys'
import { fromUtcInput } from './signing-keys'
import { KeyCustomer } from './key-customer'
import { KeyCredits } from '../credits'
import { KeyRelays } from './key-relays'
import { KeyMachineIdentity } from './key-devices'
import { OVERRIDABLE } from '../../../core/key-settings'
import { AirGappedMark } from './key-offline'

const short = (fp: string) => `${fp.slice(0, 12)}…`
/** Where a setting of a key with a policy comes from, for its field's hint. */
function from(k: KeyDetail, field: Resettable) {
  if (k.policy_id === null) return ''
  return Object.hasOwn(k.overrides, field) ? ' Set on this key.' : ' From the policy: a change sets it on this key only.'
}

/** PATCH /v1/keys/:id: the settings a key keeps after creation. Only changed values are sent. */
function Settings({ k, onDone }: { k: KeyDetail; onDone: () => void }) {
  const release = splitSeconds(k.release_after_seconds)
  const grace0 = splitSeconds(k.grace_seconds || null)
  const metaText = (m: Record<string, unknown> | null) => (m && Object.keys(m).length ? JSON.stringify(m, null, 2) : '')
  const [plan, setPlan] = useState(k.plan ?? '')
  const [limit, setLimit] = useState(String(k.activation_limit))
  const [amount, setAmount] = useState(release.amount)
  const [unit, setUnit] = useState<Unit>(release.unit)
  const [graceAmount, setGraceAmount] = useState(grace0.amount)
  const [graceUnit, setGraceUnit] = useState<Unit>(grace0.unit)
  const [after, setAfter] = useState(k.after_expiry)
  const [deact, setDeact] = useState(k.deactivations_allowed === null ? '' : String(k.deactivations_allowed))
  const [meta, setMeta] = useState(metaText(k.metadata))
  const [saved, setSaved] = useState(false)
  // When the key changes elsewhere (a reset to the policy, another tab's save shown on reload), the
  // fields whose stored value moved follow it; what is being typed elsewhere in the form stays.
  const prev = useRef(k)
  useEffect(() => {
    const p = prev.current
    prev.current = k
    if (p === k) return
    if (p.plan !== k.plan) setPlan(k.plan ?? '')
    if (p.activation_limit !== k.activation_limit) setLimit(String(k.activation_limit))
    if (p.release_after_seconds !== k.release_after_seconds) {
      const r = splitSeconds(k.release_after_seconds)
      setAmount(r.amount)
      setUnit(r.unit)
    }
    if (p.grace_seconds !== k.grace_seconds) {
      const g = splitSeconds(k.grace_seconds || null)
      setGraceAmount(g.amount)
      setGraceUnit(g.unit)
    }
    if (p.after_expiry !== k.after_expiry) setAfter(k.after_expiry)
    if (p.deactivations_allowed !== k.deactivations_allowed) setDeact(k.deactivations_allowed === null ? '' : String(k.deactivations_allowed))
    if (JSON.stringify(p.metadata) !== JSON.stringify(k.metadata)) setMeta(metaText(k.metadata))
  }, [k])
  const body = () => {
    const errors: FieldError[] = []
    const out: Record<string, unknown> = {}
    const push = (e: FieldError | null) => e && errors.push(e)
    if ((plan.trim() || null) !== k.plan) out.plan = plan.trim() || null
    if (limit.trim() !== String(k.activation_limit)) out.activation_limit = limit.trim() === '' ? NaN : Number(limit)
    // The API's own message for these (a number or null) names no range: the browser says it first.
    const seconds = toSeconds(amount, unit)
    const releaseError = checks.release(seconds, 'body.release_after_seconds')
    if (releaseError) push(releaseError)
    else if (seconds !== k.release_after_seconds) out.release_after_seconds = seconds
    const allowed = deact.trim() === '' ? null : Number(deact)
    const deactError = checks.deactivations(allowed, 'body.deactivations_allowed')
    if (deactError) push(deactError)
    else if (allowed !== k.deactivations_allowed) out.deactivations_allowed = allowed
    const grace = toSeconds(graceAmount, graceUnit) ?? 0
    const graceError = checks.grace(grace, 'body.grace_seconds')
    if (graceError) push(graceError)
    else if (grace !== k.grace_seconds) out.grace_seconds = grace
    if (after !== k.after_expiry) out.after_expiry = after
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
    return Object.keys(changes).length ? patch<Key>(apiPath`/v1/keys/${k.id}`, changes) : null
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
  const fields = [...OVERRIDABLE.filter((f) => f !== 'entitlements'), 'metadata']
  return html`<form class="panel form" onSubmit=${submit} aria-labelledby="settings-h" novalidate>
    <h2 id="settings-h">Settings</h2>
    <div class="form-grid pairs">
      <${Field} label="Plan" id="set-plan" name="plan" problem=${problem} hint=${'Free text your application reads, e.g. pro. Empty: none.' + from(k, 'plan')}>
        <input id="set-plan" maxlength="64" value=${plan} onInput=${edit(setPlan)} />
      </${Field}>
      <${Field} label="Devices allowed" id="set-limit" name="activation_limit" problem=${problem} hint=${`${k.activations_used} in use. Lowering it releases no device.` + from(k, 'activation_limit')}>
        <input id="set-limit" type="number" inputmode="numeric" min="1" max="10000" value=${limit} onInput=${edit(setLimit)} />
      </${Field}>
      <${Field} label="Release an inactive device after" id="set-release" name="release_after_seconds" problem=${problem}
        hint=${'A device that has not validated for this long frees its seat (1 minute to 365 days). Empty: never.' + from(k, 'release_after_seconds')}>
        <div class="input-unit">
          <input id="set-release" type="number" inputmode="decimal" min="0" step="any" value=${amount} placeholder="Never" onInput=${edit(setAmount)} />
          <label class="sr-only" for="set-release-unit">Unit</label>
          <select id="set-release-unit" value=${unit} onChange=${edit((v) => setUnit(v as Unit))}>
            ${UNITS.map((u) => html`<option value=${u.name}>${u.name}</option>`)}
          </select>
        </div>
      </${Field}>
      <${Field} label="Device releases allowed to the key holder" id="set-deact" name="deactivations_allowed" problem=${problem}
        hint=${`How many devices the holder may release from their app (0: none; empty: no limit). Used so far: ${k.deactivations_used}. Releases made here do not count.` + from(k, 'deactivations_allowed')}>
        <input id="set-deact" type="number" inputmode="numeric" min="0" max="10000" value=${deact} placeholder="Unlimited" onInput=${edit(setDeact)} />
      </${Field}>
      <${Field} label="Grace after expiry" id="set-grace" name="grace_seconds" problem=${problem}
        hint=${'After the expiry, validate stays valid this long, marked expired (up to 365 days). Empty: none.' + from(k, 'grace_seconds')}>
        <div class="input-unit">
          <input id="set-grace" type="number" inputmode="decimal" min="0" step="any" value=${graceAmount} placeholder="None" onInput=${edit(setGraceAmount)} />
          <label class="sr-only" for="set-grace-unit">Grace counted in</label>
          <select id="set-grace-unit" value=${graceUnit} onChange=${edit((v) => setGraceUnit(v as Unit))}>
            ${UNITS.map((u) => html`<option value=${u.name}>${u.name}</option>`)}
          </select>
        </div>
      </${Field}>
      <${Field} label="After expiry" id="set-after" name="after_expiry" problem=${problem} hint=${'Keep: the key keeps working after its expiry, marked expired (perpetual fallback).' + from(k, 'after_expiry')}>
        <select id="set-after" value=${after} onChange=${edit((v) => setAfter(v as Key['after_expiry']))}>
          <option value="refuse">Refuse (the key stops working)</option>
          <option value="keep">Keep working, marked expired</option>
        </select>
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

/**
 * Each inherited setting (core/key-settings.ts: a setting added there does not compile here until it
 * has a label): this key's effective value, its policy's, and a reset for what the key sets itself.
 */
const SHOWN: Record<Resettable, { label: string; show: (v: never) => string }> = {
  plan: { label: 'Plan', show: (v: string | null) => v ?? '—' },
  activation_limit: { label: 'Devices allowed', show: (v: number) => String(v) },
  release_after_seconds: { label: 'Inactive devices', show: releaseInWords },
  deactivations_allowed: { label: 'Released by the holder', show: limitInWords },
  grace_seconds: { label: 'Grace after expiry', show: graceInWords },
  after_expiry: { label: 'After expiry', show: afterExpiryInWords },
  component_match: { label: 'Machine identity', show: (v: string) => (v === 'off' ? 'Off (components stored, not checked)' : `Components must match: ${v}`) },
  entitlements: {
    label: 'Entitlements',
    show: (v: Record<string, true | number | string>) => (Object.keys(v).length ? Object.entries(v).map(([c, x]) => (x === true ? c : `${c} ${showValue(x)}`)).join(', ') : 'None'),
  },
}
const INHERITED = OVERRIDABLE.map((field) => ({ field, ...SHOWN[field] }))

function Inheritance({ k, policy, onDone }: { k: KeyDetail; policy: Policy; onDone: () => void }) {
  const [what, setWhat] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | null>(null)
  const own = Object.keys(k.overrides) as Resettable[]
  const reset = async (fields: Resettable[], label: string) => {
    setBusy(true)
    setProblem(null)
    setWhat(null)
    try {
      await patch<Key>(apiPath`/v1/keys/${k.id}`, { reset: fields })
      setWhat(label)
      onDone()
    } catch (err) {
      setProblem(asProblem(err))
    } finally {
      setBusy(false)
    }
  }
  return html`<section class="panel" aria-labelledby="inh-h">
    <div class="panel-head">
      <h2 id="inh-h">Inherited from <a href=${`#/policies/${policy.id}`}>${policy.name}</a></h2>
      ${own.length > 1 ? html`<button class="btn small" type="button" disabled=${busy} onClick=${() => void reset(own, 'Every setting is the policy’s again.')}>Reset all to the policy</button>` : null}
    </div>
    <p class="muted small">${own.length
      ? `This key sets ${own.length === 1 ? 'one value' : `${own.length} values`} itself; the others follow the policy, including its later edits.`
      : 'Every value follows the policy, including its later edits.'}</p>
    <div class="table-wrap"><table class="table">
      <thead><tr><th>Setting</th><th>This key</th><th class="hide-s">Policy</th><th><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${INHERITED.map(({ field, label, show }) => {
        const mine = own.includes(field)
        const f = show as (v: unknown) => string
        return html`<tr class=${mine ? 'overridden' : ''}>
          <th scope="row">${label}</th>
          <td>${f((k as Record<string, unknown>)[field])}${mine ? html` <span class="chip">set on this key</span>` : null}</td>
          <td class="hide-s muted">${f((policy as Record<string, unknown>)[field])}</td>
          <td class="row-actions">${mine
            ? html`<button class="btn small" type="button" disabled=${busy} aria-label=${`Reset ${label.toLowerCase()} to the policy`}
                onClick=${() => void reset([field], `${label}: the policy’s value again.`)}>Reset to policy</button>`
            : null}</td>
        </tr>`
      })}</tbody>
    </table></div>
    ${problem ? html`<p class="alert" role="alert">${problem.detail}</p>` : what && !busy ? html`<p class="ok" role="status">${what}</p>` : null}
  </section>`
}

/** Suspend (with an optional reason and end), change a suspension, or reinstate. */
function Suspension({ k, onDone }: { k: KeyDetail; onDone: () => void }) {
  const suspended = k.suspended_at !== null
  const [reason, setReason] = useState(k.suspend_reason ?? '')
  const [until, setUntil] = useState(k.suspended_until ? utcInput(k.suspended_until) : '')
  const { busy, problem, submit } = useSubmit(async () => {
    const at = until ? fromUtcInput(until) : null
    if (at && !(at.getTime() > Date.now())) invalid([{ field: 'body.until', message: 'A moment in the future, or empty: until you reinstate it.' }])
    return post<Key>(apiPath`/v1/keys/${k.id}/suspend`, { ...(reason.trim() ? { reason: reason.trim() } : {}), ...(at ? { until: at.toISOString() } : {}) })
  }, onDone)
  const reinstate = useSubmit(() => post<Key>(apiPath`/v1/keys/${k.id}/reinstate`), onDone)
  if (k.status === 'revoked') return null
  return html`<form class="panel form" onSubmit=${submit} aria-labelledby="susp-h" novalidate>
    <h2 id="susp-h">${suspended ? 'Suspended' : 'Suspend'}</h2>
    ${suspended
      ? html`<p>Validate answers <code>suspended</code> on every device since ${when(k.suspended_at)}${k.suspend_reason ? ` (${k.suspend_reason})` : ''}.
          ${k.suspended_until ? ` Keyward reinstates it by itself at ${when(k.suspended_until)}.` : ' It stays suspended until you reinstate it.'}</p>
          <div class="form-actions"><button class="btn primary" type="button" disabled=${reinstate.busy} onClick=${() => reinstate.submit()}>Reinstate key</button></div>
          ${reinstate.problem ? html`<p class="alert" role="alert">${reinstate.problem.detail}</p>` : null}
          <h3>Change the suspension</h3>`
      : html`<p class="muted small">Pauses the key on every node at once; unlike a revoke, it can be reinstated. Devices keep their seats.</p>`}
    <${Field} label="Why (optional)" id="susp-reason" name="reason" problem=${problem}>
      <input id="susp-reason" maxlength="500" value=${reason} placeholder="e.g. payment overdue" onInput=${(e: Event) => setReason((e.target as HTMLInputElement).value)} />
    </${Field}>
    <${Field} label="Reinstate automatically at (optional, UTC)" id="susp-until" name="until" problem=${problem} hint=${`${TIME_RULE} Now: ${nowUtc()}. Empty: until you reinstate it.`}>
      <input id="susp-until" type="datetime-local" value=${until} onInput=${(e: Event) => setUntil((e.target as HTMLInputElement).value)} />
    </${Field}>
    <${FormProblem} problem=${problem} fields=${['reason', 'until']} />
    <button class="btn danger" type="submit" disabled=${busy}>${suspended ? 'Save suspension' : 'Suspend key'}</button>
  </form>`
}

/**
 * The key page's one rule for what you type: dates and times are UTC, as every node acts on them at
 * once (the signing-keys page reads its times the same way). Each field's hint says it, with the hour now.
 */
export const TIME_RULE = 'In UTC, like every date you type on this page.'

/** `2026-11-30T10:00` in UTC, as a datetime-local input read as UTC holds it. */
export function utcInput(iso: string) {
  return new Date(iso).toISOString().slice(0, 16)
}
const nowUtc = () => `${new Date().toISOString().slice(11, 16)} UTC`

/** A new key value for a leaked or lost one: shown once here, the old value refused at once. */
function Reissue({ k, onDone }: { k: KeyDetail; onDone: () => void }) {
  const [value, setValue] = useState<string | null>(null)
  const { busy, problem, submit } = useSubmit(() => post<CreatedKey>(apiPath`/v1/keys/${k.id}/reissue`), (c) => {
    setValue(c.key_value)
    onDone()
  })
  if (k.status === 'revoked') return null
  const go = () => {
    if (confirm(`Give key ${k.key_prefix}… a new value? The current value stops working at once on every node; devices, history and settings stay with the key.`)) submit()
  }
  return html`<section class="panel" aria-labelledby="reissue-h">
    <h2 id="reissue-h">Reissue</h2>
    ${value
      ? html`<${Secret} label="New license key" value=${value}
          note="Shown once: send it to your customer now. The old value no longer works anywhere; Keyward keeps only a hash." />`
      : html`<p class="muted small">For a leaked key, or a customer who lost theirs: the key gets a new value. <strong>The current value stops working at once</strong>, on every node; devices, history and settings stay.</p>`}
    ${problem ? html`<p class="alert" role="alert">${problem.detail}</p>` : null}
    ${value ? null : html`<button class="btn danger" type="button" disabled=${busy} onClick=${go}>Reissue key value</button>`}
  </section>`
}

function Revoke({ k, onDone }: { k: KeyDetail; onDone: () => void }) {
  const [reason, setReason] = useState('')
  const { busy, problem, submit } = useSubmit(() => post(apiPath`/v1/keys/${k.id}/revoke`, reason ? { reason } : {}), onDone)
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
  const { busy, problem, submit } = useSubmit(() => post(apiPath`/v1/keys/${k.id}/extend`, { expires_at: perpetual ? null : endOfDay(date) }), onDone)
  if (k.status === 'revoked') return null
  return html`<form class="panel form" onSubmit=${submit} aria-label="Extend">
    <h2>Extend</h2>
    <${Field} label="Expires at the end of (UTC)" id="extend-date" name="expires_at" problem=${problem} hint=${`${TIME_RULE} Now: ${nowUtc()}. The key works to the end of that day; an expired key becomes active again.`}>
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
  const [issued, setIssued] = useState<IssuedLicense | null>(null)
  const { busy, problem, submit } = useSubmit(
    () => post<IssuedLicense>(apiPath`/v1/keys/${k.id}/offline-licenses`, { device_fingerprint: fp.trim().toLowerCase(), ttl_seconds: Math.round(Number(days) * 86400) }),
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
    <p class="muted small">For a device that cannot reach this service. The device takes a seat like a validate.</p>
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
      await del(apiPath`/v1/keys/${k.id}/activations/${a.id}`)
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
                <td><span class="mono" title=${a.device_fingerprint}>${a.device_name ? a.device_name : short(a.device_fingerprint)}</span><${AirGappedMark} a=${a} /></td>
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
                <span class="mono">${short(a.device_fingerprint)}</span> activated ${when(a.activated_at)}${a.country ? ` from ${a.country}` : ''}<${AirGappedMark} a=${a} />
                ${a.status === 'deactivated' ? html` · released ${when(a.deactivated_at)} <span class="badge">${a.deactivation_reason}</span>` : html` · <${Badge} status="active" />`}
              </li>`,
            )}
          </ol>`}
    </section>`
}

/** The key page's tabs, in order; `#/keys/<id>?tab=<id>` opens one (the first when absent or unknown). */
export const KEY_TABS = [
  { id: 'overview', label: 'Overview' },
  { id: 'settings', label: 'Settings' },
  { id: 'lifecycle', label: 'Actions' }, // suspend, reissue, extend, revoke
  { id: 'offline', label: 'Offline' },
] as const
export type KeyTab = (typeof KEY_TABS)[number]['id']

/** The tab row: links (each tab has its address), arrow keys move between them as in any tab list. */
function Tabs({ id, tab }: { id: string; tab: KeyTab }) {
  const go = (t: KeyTab) => {
    location.replace(`#/keys/${encodeURIComponent(id)}?tab=${t}`)
    document.getElementById(`tab-${t}`)?.focus()
  }
  const onKey = (e: KeyboardEvent) => {
    const i = KEY_TABS.findIndex((t) => t.id === tab)
    const next = e.key === 'ArrowRight' ? i + 1 : e.key === 'ArrowLeft' ? i - 1 : e.key === 'Home' ? 0 : e.key === 'End' ? KEY_TABS.length - 1 : null
    if (next === null) return
    e.preventDefault()
    go(KEY_TABS[(next + KEY_TABS.length) % KEY_TABS.length]!.id)
  }
  return html`<div class="tabs" role="tablist" aria-label="Key sections" onKeyDown=${onKey}>
    ${KEY_TABS.map((t) => html`<a role="tab" id=${`tab-${t.id}`} href=${`#/keys/${encodeURIComponent(id)}?tab=${t.id}`}
      aria-selected=${t.id === tab ? 'true' : 'false'} aria-controls="key-tabpanel" tabindex=${t.id === tab ? 0 : -1}
      onClick=${(e: Event) => { e.preventDefault(); go(t.id) }}>${t.label}</a>`)}
  </div>`
}

export function KeyPage({ id, query }: { id: string; query?: URLSearchParams }) {
  const asked = query?.get('tab')
  const tab: KeyTab = KEY_TABS.find((t) => t.id === asked)?.id ?? 'overview'
  const key = useLoad(() => get<KeyDetail>(apiPath`/v1/keys/${id}`), [id])
  const product = useLoad(async () => (key.data ? get<Product>(apiPath`/v1/products/${key.data.product_id}`).catch(() => null) : null), [key.data?.product_id])
  const policyId = key.data?.policy_id ?? null
  const policy = useLoad(async () => (policyId ? get<Policy>(apiPath`/v1/policies/${policyId}`) : null), [policyId])
  if (key.error) return html`<${PageHead} title="License key" /><${LoadError} problem=${key.error} what="read license keys" />`
  const k = key.data
  if (!k) return html`<${PageHead} title="License key" /><${Spinner} />`
  const p = policy.data
  const pending = k.expiry_pending
  const about = html`<section class="panel" aria-labelledby="about-h">
      <h2 id="about-h">About this key</h2>
      <dl class="props">
        <div class="wide"><dt>Customer</dt><dd><${KeyCustomer} k=${k} onDone=${key.reload} /></dd></div>
        <div><dt>Product</dt><dd>${product.data?.name ?? html`<span class="mono">${k.product_id}</span>`}</dd></div>
        <div><dt>Policy</dt><dd>${k.policy_id ? html`<a href=${`#/policies/${k.policy_id}`}>${p?.name ?? k.policy_id}</a>` : 'None'}</dd></div>
        <div><dt>Plan</dt><dd>${k.plan ?? '—'}</dd></div>
        <div><dt>Expires</dt><dd>${k.expires_at ? when(k.expires_at) : pending ? `${p?.duration ? termInWords(p.duration) : 'The policy’s term'} from the first activation` : 'Never'}</dd></div>
        <div><dt>Created</dt><dd>${when(k.created_at)}</dd></div>
        ${k.suspended_at ? html`<div><dt>Suspended</dt><dd>${when(k.suspended_at)}${k.suspend_reason ? ` (${k.suspend_reason})` : ''}</dd></div>` : null}
        ${k.suspended_until ? html`<div><dt>Reinstated at</dt><dd>${when(k.suspended_until)}</dd></div>` : null}
        ${k.revoked_at ? html`<div><dt>Revoked</dt><dd>${when(k.revoked_at)}${k.revoke_reason ? ` (${k.revoke_reason})` : ''}</dd></div>` : null}
        <div><dt>Devices</dt><dd>${k.activations_used} of ${k.activation_limit}</dd></div>
        <div><dt>Inactive devices</dt><dd>${releaseInWords(k.release_after_seconds)}</dd></div>
        <div><dt>Released by the holder</dt><dd>${k.deactivations_allowed === null ? `${k.deactivations_used} (no limit)` : `${k.deactivations_used} of ${k.deactivations_allowed} allowed`}</dd></div>
        <div><dt>Grace after expiry</dt><dd>${graceInWords(k.grace_seconds)}</dd></div>
        <div><dt>After expiry</dt><dd>${afterExpiryInWords(k.after_expiry)}</dd></div>
        <div><dt>Credits</dt><dd>${k.credits ? `${k.credits.remaining.toLocaleString()} left` : 'Unmetered'}</dd></div>
        <div class="wide"><dt>Id</dt><dd class="mono">${k.id}</dd></div>
      </dl>
    </section>`
  // Each tab's panels, top to bottom. A feature's own panel goes in as one more element of its tab's
  // list (its component in a file of its own, e.g. pages/key-relays.ts, taking `k` and `onDone`).
  const panels: Record<KeyTab, unknown[]> = {
    overview: [
      about,
      html`<${Devices} k=${k} onChange=${key.reload} />`,
      html`<${KeyMachineIdentity} k=${k} onDone=${key.reload} />`,
      html`<${KeyRelays} k=${k} onChange=${key.reload} />`,
    ],
    settings: [
      k.policy_id
        ? policy.error
          ? html`<${LoadError} problem=${policy.error} what="read its policy" />`
          : p ? html`<${Inheritance} k=${k} policy=${p} onDone=${key.reload} />` : html`<${Spinner} />`
        : null,
      html`<${Settings} k=${k} onDone=${key.reload} />`,
      k.policy_id && !p
        ? null
        : html`<${Entitlements} noun="key"
            own=${k.policy_id ? ((k.overrides.entitlements ?? {}) as Own) : k.entitlements}
            inherited=${k.policy_id ? p!.entitlements : null}
            save=${(next: Own) => patch(apiPath`/v1/keys/${k.id}`, { entitlements: next })} onSaved=${key.reload} />`,
      html`<${KeyCredits} k=${k} onDone=${key.reload} />`,
    ],
    lifecycle: [
      k.status === 'revoked' ? html`<p class="panel muted">This key is revoked: revoking is final, so nothing here applies any more.</p>` : null,
      html`<div class="grid-2">
        <${Suspension} k=${k} onDone=${key.reload} />
        <${Reissue} k=${k} onDone=${key.reload} />
      </div>`,
      html`<div class="grid-2">
        <${Extend} k=${k} onDone=${key.reload} />
        <${Revoke} k=${k} onDone=${key.reload} />
      </div>`,
    ],
    offline: [
      k.status !== 'active' ? html`<p class="panel muted">Offline licenses are issued for an active key only.</p>` : null,
      html`<${Offline} k=${k} />`,
    ],
  }
  return html`<p class="crumbs"><a href="#/keys">License keys</a> /</p>
    <${PageHead} title=${`Key ${k.key_prefix}…`}>
      <${Badge} status=${k.status} />
      <a class="btn" href=${`#/activity?resource_id=${k.id}`}>Activity</a>
    </${PageHead}>
    ${k.status === 'suspended'
      ? html`<p class="alert warn" role="status">Suspended${k.suspend_reason ? ` (${k.suspend_reason})` : ''}: validate answers <code>suspended</code> on every device${k.suspended_until ? ` until ${when(k.suspended_until)}` : ' until you reinstate it'}.</p>`
      : null}
    <${Tabs} id=${k.id} tab=${tab} />
    <div id="key-tabpanel" role="tabpanel" aria-labelledby=${`tab-${tab}`}>${panels[tab]}</div>`
}
