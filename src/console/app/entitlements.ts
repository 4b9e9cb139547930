// Entitlements as a table one can add to and remove from, on a policy and on a key. Each change is
// saved at once (PATCH with the whole map, as the API replaces it), so what the table shows is what
// every node answers. On a key with a policy the table shows the merge: the policy's codes, the key's
// own values over them, and the inherited codes the key removes (`{code: null}`).
import { useState } from 'preact/hooks'
import { ENTITLEMENT_CODE, MAX_ENTITLEMENTS, type EntitlementValue } from '../../core/entitlements'
import type { FieldError, Problem } from './api'
import { asProblem, Field, FormProblem, html, invalid } from './ui'

export type Own = Record<string, EntitlementValue | null>
type Kind = 'true' | 'number' | 'string'

/** A value as the table shows it: `true` reads "on", a string in quotes. */
export const showValue = (v: EntitlementValue) => (v === true ? 'on' : typeof v === 'number' ? v.toLocaleString() : `“${v}”`)

/** The value typed in the form, or why it is not one (in the API's own words). */
function parseValue(kind: Kind, text: string): EntitlementValue | FieldError {
  if (kind === 'true') return true
  if (kind === 'number') {
    const n = Number(text.trim())
    if (text.trim() === '' || !Number.isFinite(n)) return { field: 'ent-value', message: 'A number, such as 5 or 2.5.' }
    return n
  }
  if (text.length < 1 || text.length > 200) return { field: 'ent-value', message: 'Text of 1 to 200 characters.' }
  return text
}

/**
 * The API's 400 names `body.entitlements.<code>` (or the map): it is shown under the code or the value
 * field of the form, whichever it is about.
 */
function placed(p: Problem | null): Problem | null {
  if (!p?.errors) return p
  return {
    ...p,
    errors: p.errors.map((e) =>
      e.field.startsWith('body.entitlements') ? { field: /code/.test(e.message) ? 'ent-code' : 'ent-value', message: e.message } : e,
    ),
  }
}

interface Row {
  code: string
  /** What the key (or policy) answers: null when the code is removed on the key. */
  value: EntitlementValue | null
  inherited: EntitlementValue | undefined
  own: boolean
}

export function Entitlements(props: {
  /** The map edited: a policy's, or a key's own (nulls remove inherited codes). */
  own: Own
  /** The policy's map, for a key with a policy; null otherwise. */
  inherited: Record<string, EntitlementValue> | null
  /** What the object is, for the texts: "policy" or "key". */
  noun: 'policy' | 'key'
  save: (next: Own) => Promise<unknown>
  onSaved: () => void
}) {
  const { own, inherited, noun } = props
  const [code, setCode] = useState('')
  const [kind, setKind] = useState<Kind>('true')
  const [value, setValue] = useState('')
  const [done, setDone] = useState<string | null>(null)
  const codes = [...new Set([...Object.keys(inherited ?? {}), ...Object.keys(own)])].sort()
  const rows: Row[] = codes.map((c) => ({
    code: c,
    value: Object.hasOwn(own, c) ? own[c]! : inherited![c]!,
    inherited: inherited?.[c],
    own: Object.hasOwn(own, c),
  }))

  const [busy, setBusy] = useState(false)
  const [failure, setFailure] = useState<Problem | null>(null)
  /** Saves the map `make` returns (it may refuse with field errors first); `what` is said once saved. */
  const run = async (make: () => Own, what: string, after?: () => void) => {
    setBusy(true)
    setFailure(null)
    setDone(null)
    try {
      await props.save(make())
      setDone(what)
      after?.()
      props.onSaved()
    } catch (err) {
      setFailure(asProblem(err))
    } finally {
      setBusy(false)
    }
  }
  const add = (e: Event) => {
    e.preventDefault()
    const c = code.trim()
    void run(
      () => {
        const errors: FieldError[] = []
        if (!ENTITLEMENT_CODE.test(c)) errors.push({ field: 'ent-code', message: 'Lower-case letters, digits and . _ : - (up to 64, starting with a letter or digit), e.g. export or projects.max.' })
        const v = parseValue(kind, value)
        if (typeof v === 'object') errors.push(v)
        if (!Object.hasOwn(own, c) && Object.keys(own).length >= MAX_ENTITLEMENTS) errors.push({ field: 'ent-code', message: `A ${noun} holds at most ${MAX_ENTITLEMENTS} entries.` })
        if (errors.length) invalid(errors)
        return { ...own, [c]: v as EntitlementValue }
      },
      `${c} saved`,
      () => {
        setCode('')
        setValue('')
      },
    )
  }
  const without = (c: string) => Object.fromEntries(Object.entries(own).filter(([k]) => k !== c))
  const problem = placed(failure)
  return html`<section class="panel" aria-labelledby="ent-h">
    <h2 id="ent-h">Entitlements</h2>
    <p class="muted small">${noun === 'policy'
      ? 'What the keys of this policy unlock: your application asks for a code (require_entitlements) and reads its value. A change reaches every key of the policy at once; a key may add its own codes or remove one.'
      : inherited
        ? 'The policy’s codes, with this key’s own changes over them. Removing an inherited code removes it for this key only.'
        : 'What this key unlocks: your application asks for a code (require_entitlements) and reads its value.'}</p>
    ${rows.length === 0
      ? html`<p class="muted">No entitlement yet.</p>`
      : html`<div class="table-wrap"><table class="table ents">
          <thead><tr><th>Code</th><th>Value</th>${inherited ? html`<th>From</th>` : null}<th><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${rows.map(
            (r) => html`<tr class=${r.value === null ? 'removed' : ''}>
              <td class="mono">${r.code}</td>
              <td>${r.value === null ? html`<span class="muted">removed on this key</span>` : showValue(r.value)}</td>
              ${inherited
                ? html`<td class="small">${!r.own
                    ? 'Policy'
                    : r.inherited === undefined
                      ? 'This key'
                      : html`This key <span class="muted">(policy: ${showValue(r.inherited)})</span>`}</td>`
                : null}
              <td class="row-actions">${
                r.own && r.inherited !== undefined
                  ? html`<button class="btn small" type="button" disabled=${busy} aria-label=${`Use the policy’s ${r.code}`}
                      onClick=${() => { void run(() => without(r.code), `${r.code}: back to the policy’s value`) }}>${r.value === null ? 'Restore' : 'Use policy’s'}</button>`
                  : null
              }${
                r.value !== null
                  ? html`<button class="btn small danger" type="button" disabled=${busy} aria-label=${`Remove ${r.code}`}
                      onClick=${() => { void run(() => (r.inherited !== undefined ? { ...own, [r.code]: null } : without(r.code)), `${r.code} removed`) }}>Remove</button>`
                  : null
              }</td>
            </tr>`,
          )}</tbody>
        </table></div>`}
    <form class="form ent-add" onSubmit=${add} aria-label="Add an entitlement" novalidate>
      <h3>Add or change a code</h3>
      <div class="form-grid ent-grid">
        <${Field} label="Code" id="ent-code" problem=${problem}>
          <input id="ent-code" class="mono" maxlength="64" value=${code} placeholder="export" autocomplete="off" spellcheck=${false}
            onInput=${(e: Event) => setCode((e.target as HTMLInputElement).value)} />
        </${Field}>
        <${Field} label="Kind" id="ent-kind" problem=${problem}>
          <select id="ent-kind" value=${kind} onChange=${(e: Event) => setKind((e.target as HTMLSelectElement).value as Kind)}>
            <option value="true">On (true)</option><option value="number">Number</option><option value="string">Text</option>
          </select>
        </${Field}>
        <${Field} label="Value" id="ent-value" problem=${problem} hint=${kind === 'true' ? 'A feature that is simply on.' : kind === 'number' ? 'e.g. 5 projects.' : 'e.g. gold.'}>
          <input id="ent-value" disabled=${kind === 'true'} value=${kind === 'true' ? 'true' : value} inputmode=${kind === 'number' ? 'decimal' : undefined}
            onInput=${(e: Event) => setValue((e.target as HTMLInputElement).value)} />
        </${Field}>
      </div>
      <${FormProblem} problem=${problem} fields=${['ent-code', 'ent-value']} />
      ${done && !busy && !failure ? html`<p class="ok" role="status">${done}. Every node answers with it now.</p>` : null}
      <div class="form-actions"><button class="btn primary" type="submit" disabled=${busy}>Save entitlement</button></div>
    </form>
  </section>`
}
