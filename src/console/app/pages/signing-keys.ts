// The account's signing keys (their routes are in docs/api.md): the root the apps pin, and the keys
// it certifies, which sign answers and licenses and can be rotated and revoked. The page reads the key
// set (GET /v1/signing-keys, any scope) and changes it with the three full_access routes; a token
// without full_access sees the same page read-only. Dates are shown in UTC: a scheduled activation
// happens at one moment on every node, whatever the browser's zone.
import { useEffect, useRef, useState } from 'preact/hooks'
import { ApiError, apiPath, get, post, type Problem } from '../api'
import { asProblem, Badge, Copyable, Field, FormProblem, html, invalid, LoadError, PageHead, Spinner, useLoad, useSubmit, whenUtc } from '../ui'
import type { KeySet, SigningKey } from '../../../modules/signing/model'

/** A key as the page shows it: the key set's entry (with a pending key's scheduled activation). */
type Shown = KeySet['keys'][number]
/**
 * Keys not revoked an account may hold (beyond, the server answers 409 signing_key_limit). A copy of the
 * server's MAX_UNREVOKED_KEYS, whose file the browser bundle cannot take; a test keeps the two equal.
 */
export const KEY_LIMIT = 16

/** `2026-12-01T09:30` from a datetime-local input, read as UTC (the field says so). */
export function fromUtcInput(value: string): Date {
  return new Date(`${value.length === 16 ? `${value}:00` : value}Z`)
}

/** A change refused for the token's scope turns the page read-only instead of failing field by field. */
const forbidden = (p: Problem | null) => p?.status === 403

function CreateSigningKey({ onDone, onCancel, onForbidden }: { onDone: (k: SigningKey) => void; onCancel: () => void; onForbidden: (p: Problem) => void }) {
  const [at, setAt] = useState('')
  const { busy, problem, submit } = useSubmit(async () => {
    let activate_at: string | undefined
    if (at) {
      const d = fromUtcInput(at)
      if (Number.isNaN(d.getTime()) || d.getTime() <= Date.now()) {
        invalid([{ field: 'body.activate_at', message: 'A moment in the future (UTC), or empty to activate the key yourself.' }])
      }
      activate_at = d.toISOString()
    }
    try {
      return await post<SigningKey>(apiPath`/v1/signing-keys`, activate_at ? { activate_at } : {})
    } catch (err) {
      if (err instanceof ApiError && forbidden(err.problem)) onForbidden(err.problem)
      throw err
    }
  }, onDone)
  return html`<form class="panel form" onSubmit=${submit} aria-labelledby="sk-new-h" novalidate>
    <h2 id="sk-new-h">New signing key</h2>
    <p class="muted small">Keyward makes the key pair and the root certifies it. The private half stays on the server, encrypted; it is never shown.</p>
    <div class="form-grid">
      <${Field} label="Activate at (optional, UTC)" id="sk-activate-at" name="activate_at" problem=${problem}
        hint="Every node switches to it at this moment. Empty: it waits as pending until you activate it.">
        <input id="sk-activate-at" type="datetime-local" value=${at} onInput=${(e: Event) => setAt((e.target as HTMLInputElement).value)} />
      </${Field}>
    </div>
    <${FormProblem} problem=${problem} fields=${['activate_at']} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy}>Create signing key</button>
      <button class="btn" type="button" onClick=${onCancel}>Cancel</button>
    </div>
  </form>`
}

/** The confirmation before a revoke: what stops verifying, for whom, and what signs afterwards. */
function RevokeDialog({ k, onClose, onDone, onForbidden }: { k: Shown; onClose: () => void; onDone: (k: SigningKey) => void; onForbidden: (p: Problem) => void }) {
  const ref = useRef<HTMLDialogElement>(null)
  const [reason, setReason] = useState('')
  useEffect(() => {
    const d = ref.current
    if (d && !d.open) d.showModal()
    return () => d?.open && d.close()
  }, [])
  const { busy, problem, submit } = useSubmit(async () => {
    try {
      return await post<SigningKey>(apiPath`/v1/signing-keys/${k.kid}/revoke`, reason.trim() ? { reason: reason.trim() } : {})
    } catch (err) {
      if (err instanceof ApiError && forbidden(err.problem)) onForbidden(err.problem)
      throw err
    }
  }, onDone)
  return html`<dialog ref=${ref} class="dialog" aria-labelledby="sk-revoke-h" aria-describedby="sk-revoke-what" onClose=${onClose}>
    <form onSubmit=${submit}>
      <h2 id="sk-revoke-h">Revoke this signing key?</h2>
      <p class="mono small kid">${k.kid}</p>
      <ul id="sk-revoke-what" class="consequences">
        <li><strong>Licenses and answers signed by this key stop verifying</strong> in your apps once they have refreshed their key set (an online app refreshes it once a day).</li>
        <li>Apps that are offline keep trusting it until they refresh.</li>
        ${k.state === 'active'
          ? html`<li><strong>It is the active key:</strong> from now on the root signs answers and licenses, until you activate another key.</li>`
          : null}
        ${k.state === 'pending' && k.activate_at ? html`<li>Its activation scheduled for ${whenUtc(k.activate_at)} is cancelled.</li>` : null}
        <li>An app that syncs a license signed by this key gets it back re-signed by the current signer.</li>
        <li>This is final: a revoked key cannot be activated again.</li>
      </ul>
      <${Field} label="Reason (optional)" id="sk-revoke-reason" name="reason" problem=${problem}>
        <input id="sk-revoke-reason" maxlength="500" value=${reason} placeholder="e.g. private key exposed" onInput=${(e: Event) => setReason((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${FormProblem} problem=${problem} fields=${['reason']} />
      <div class="form-actions">
        <button class="btn danger" type="submit" disabled=${busy}>Revoke key</button>
        <button class="btn" type="button" onClick=${onClose}>Cancel</button>
      </div>
    </form>
  </dialog>`
}

const dayFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeZone: 'UTC' })
const timeFmt = new Intl.DateTimeFormat(undefined, { timeStyle: 'short', timeZone: 'UTC' })
/** A moment in a table cell, in UTC (its column says so): the day, then the time, each kept whole. */
function Moment({ iso }: { iso: string }) {
  const d = new Date(iso)
  return html`<time datetime=${iso} title=${iso}><span>${dayFmt.format(d)}</span> <span>${timeFmt.format(d)}</span></time>`
}

/** What signs right now, and what is about to. */
function Signer({ keys }: { keys: Shown[] }) {
  const active = keys.find((k) => k.state === 'active')
  const next = keys
    .filter((k) => k.state === 'pending' && k.activate_at)
    .sort((a, b) => a.activate_at!.localeCompare(b.activate_at!))[0]
  return html`<p class="signer" role="status">
    ${active
      ? html`Answers and licenses are signed by key <span class="mono">${active.kid}</span>, active since ${whenUtc(active.activated_at)}.`
      : html`Answers and licenses are signed by the root: no signing key is active.`}
    ${next ? html` Key <span class="mono">${next.kid}</span> takes over at ${whenUtc(next.activate_at)}.` : null}
  </p>`
}

export function SigningKeys() {
  const set = useLoad(() => get<KeySet>(apiPath`/v1/signing-keys`), [])
  const [creating, setCreating] = useState(false)
  const [revoking, setRevoking] = useState<Shown | null>(null)
  const [readOnly, setReadOnly] = useState<Problem | null>(null)
  const [done, setDone] = useState<string | null>(null)
  const [problem, setProblem] = useState<Problem | null>(null)
  const [busy, setBusy] = useState<string | null>(null)
  const changed = (text: string) => {
    setDone(text)
    set.reload()
  }
  const activate = async (k: Shown) => {
    setBusy(k.kid)
    setProblem(null)
    setDone(null)
    try {
      await post<SigningKey>(apiPath`/v1/signing-keys/${k.kid}/activate`)
      changed(`Key ${k.kid} is active: every node signs with it from now on.`)
    } catch (err) {
      const p = asProblem(err)
      if (forbidden(p)) setReadOnly(p)
      else setProblem(p)
    } finally {
      setBusy(null)
    }
  }
  if (set.error) return html`<${PageHead} title="Signing keys" /><${LoadError} problem=${set.error} what="read the signing keys" />`
  const data = set.data
  const keys: Shown[] = data?.keys ?? []
  const counted = keys.filter((k) => k.state !== 'revoked').length
  return html`<${PageHead} title="Signing keys">
      ${readOnly
        ? null
        : html`<button class="btn primary" type="button" disabled=${creating} onClick=${() => { setDone(null); setCreating(true) }}>New signing key</button>`}
    </${PageHead}>
    <p class="muted lead">Your apps pin the root. The root certifies signing keys; the active one signs every answer and license, so you can rotate it, or revoke a leaked one, without shipping a new app.</p>
    ${readOnly
      ? html`<div class="panel notice" role="status">
          <h2>Changing signing keys needs the <code>full_access</code> scope</h2>
          <p>This token can read the keys (as your apps do), not create, activate or revoke them. Sign in with a <code>full_access</code> token to change them.</p>
          <p class="muted">${readOnly.detail}</p>
        </div>`
      : null}
    ${creating && !readOnly
      ? html`<${CreateSigningKey}
          onCancel=${() => setCreating(false)}
          onForbidden=${(p: Problem) => { setCreating(false); setReadOnly(p) }}
          onDone=${(k: SigningKey) => {
            setCreating(false)
            changed(k.activate_at ? `Key ${k.kid} created: it becomes active at ${whenUtc(k.activate_at)}.` : `Key ${k.kid} created: pending until you activate it.`)
          }} />`
      : null}
    ${done ? html`<p class="ok" role="status">${done}</p>` : null}
    ${problem ? html`<p class="alert" role="alert">${problem.detail}</p>` : null}
    ${!data
      ? html`<${Spinner} />`
      : html`<section class="panel" aria-labelledby="sk-root-h">
          <h2 id="sk-root-h">Root</h2>
          <dl class="props">
            <div class="wide"><dt>Key id (kid)</dt><dd class="mono kid">${data.root.kid}</dd></div>
          </dl>
          <${Copyable} label="Root public key (Ed25519, base64)" id="sk-root-public-key" value=${data.root.public_key}
            note=${html`Build it into your apps as the SDK's <code>rootPublicKey</code>. The root never changes: it signs the key set and each key's certificate, and signs answers and licenses itself while no key is active.`} />
        </section>
        <section aria-labelledby="sk-keys-h">
          <div class="section-head">
            <h2 id="sk-keys-h">Signing keys</h2>
            <span class="muted small">${counted} of ${KEY_LIMIT} in use (revoked keys do not count)</span>
          </div>
          <${Signer} keys=${keys} />
          ${keys.length === 0
            ? html`<div class="panel empty"><p>No signing key yet, so the root signs everything. Create one, then activate it now or at a time you choose.</p></div>`
            : html`<div class="table-wrap"><table class="table stack signing-keys">
                <thead><tr><th>State</th><th>Key id (kid)</th><th>Created (UTC)</th><th>Activated (UTC)</th><th>Revoked (UTC)</th>${readOnly ? null : html`<th><span class="sr-only">Actions</span></th>`}</tr></thead>
                <tbody>${keys.map(
                  (k) => html`<tr>
                    <td data-label="State"><${Badge} status=${k.state} /></td>
                    <td data-label="Kid" class="mono small kid">${k.kid}</td>
                    <td data-label="Created (UTC)" class="date"><${Moment} iso=${k.created_at} /></td>
                    <td data-label=${k.activated_at || !k.activate_at ? 'Activated (UTC)' : 'Scheduled (UTC)'} class=${'date' + (k.activated_at || k.activate_at ? '' : ' none')}>
                      ${k.activated_at
                        ? html`<${Moment} iso=${k.activated_at} />`
                        : k.activate_at && k.state === 'pending'
                          ? html`<span class="scheduled"><span class="scheduled-for">Scheduled for </span><${Moment} iso=${k.activate_at} /></span>`
                          : '—'}
                    </td>
                    <td data-label="Revoked (UTC)" class=${'date' + (k.revoked_at ? '' : ' none')}>${k.revoked_at ? html`<${Moment} iso=${k.revoked_at} />` : '—'}</td>
                    ${readOnly
                      ? null
                      : html`<td class="row-actions">
                          ${k.state === 'pending' || k.state === 'retired'
                            ? html`<button class="btn small" type="button" disabled=${busy === k.kid} onClick=${() => activate(k)}
                                aria-label=${`${k.state === 'pending' ? 'Activate now' : 'Activate again'}: ${k.kid}`}>${k.state === 'pending' ? 'Activate now' : 'Activate again'}</button>`
                            : null}
                          ${k.state !== 'revoked'
                            ? html`<button class="btn small danger" type="button" onClick=${() => { setDone(null); setProblem(null); setRevoking(k) }} aria-label=${`Revoke: ${k.kid}`}>Revoke</button>`
                            : null}
                        </td>`}
                  </tr>`,
                )}</tbody></table></div>`}
        </section>`}
    ${revoking
      ? html`<${RevokeDialog} k=${revoking}
          onClose=${() => setRevoking(null)}
          onForbidden=${(p: Problem) => { setRevoking(null); setReadOnly(p) }}
          onDone=${(k: SigningKey) => {
            setRevoking(null)
            changed(k.kid === revoking.kid && revoking.state === 'active'
              ? `Key ${k.kid} is revoked. The root signs again until you activate another key.`
              : `Key ${k.kid} is revoked.`)
          }} />`
      : null}`
}
