// Metered keys in the console: a key's credits (balance, refill rule, when it refills, add / subtract /
// set, credits consumed per day), a policy's credits for the keys created from it, and the chart of
// credits consumed per day (for a key, a product or the account).
import { useState } from 'preact/hooks'
import { apiPath, get, patch, post, withQuery } from './api'
import { DailyBars } from './chart'
import { Field, FormProblem, html, invalid, LoadError, num, Spinner, useLoad, useSubmit, when } from './ui'
import type { CreditsEntry, Range } from '../../modules/analytics/model'
import type { Key, KeyDetail } from '../../modules/keys/model'
import type { Policy } from '../../modules/policies/model'

type Refill = { amount: number; interval: 'day' | 'month'; day_of_month: number | null; mode: 'top_up' | 'add' }
const MAX = 1_000_000_000_000

const ordinal = (n: number) => `${n}${n % 10 === 1 && n !== 11 ? 'st' : n % 10 === 2 && n !== 12 ? 'nd' : n % 10 === 3 && n !== 13 ? 'rd' : 'th'}`

/** "Topped up to 1,000 every month on the 1st (00:00 UTC)", or "No refill". */
export function refillInWords(r: Refill | null): string {
  if (!r) return 'No refill'
  const how = r.mode === 'add' ? `${num(r.amount)} added` : `Topped up to ${num(r.amount)}`
  const day = (r.day_of_month ?? 1) >= 29 ? `${ordinal(r.day_of_month!)} (or the month's last day)` : ordinal(r.day_of_month ?? 1)
  return r.interval === 'day' ? `${how} every day (00:00 UTC)` : `${how} every month on the ${day} (00:00 UTC)`
}

/** Credits consumed per day (30 days ending today) for a key or a product, or the account. */
export function CreditsChart({ keyId, productId, range = '30d' }: { keyId?: string; productId?: string; range?: Range }) {
  const data = useLoad(
    () => get<CreditsEntry[]>(withQuery(apiPath`/v1/analytics/credits`, { range, key_id: keyId ?? '', product_id: productId ?? '' })),
    [keyId, productId, range],
  )
  if (data.error) return html`<${LoadError} problem=${data.error} what="read analytics" />`
  if (!data.data) return html`<${Spinner} />`
  const total = data.data.reduce((s, d) => s + d.consumed, 0)
  return html`<${DailyBars} label="Credits consumed" days=${data.data.map((d) => ({ date: d.date, value: d.consumed }))} />
    <p class="muted small">${num(total)} credits consumed in ${data.data.length} days (UTC days).</p>`
}

/** The refill rule's fields, shared by the key's and the policy's forms. */
function RefillFields({ id, value, onChange, problem }: { id: string; value: RefillDraft; onChange: (v: RefillDraft) => void; problem: unknown }) {
  const set = (k: keyof RefillDraft) => (e: Event) => onChange({ ...value, [k]: (e.target as HTMLInputElement).value })
  return html`<div class="form-grid pairs">
    <${Field} label="Refill" id=${id + '-interval'} name="credits.refill.interval" problem=${problem}>
      <select id=${id + '-interval'} value=${value.interval} onChange=${set('interval')}>
        <option value="">Never</option>
        <option value="day">Every day (00:00 UTC)</option>
        <option value="month">Every month</option>
      </select>
    </${Field}>
    ${value.interval
      ? html`<${Field} label="Refill amount" id=${id + '-amount'} name="credits.refill.amount" problem=${problem}>
          <input id=${id + '-amount'} type="number" inputmode="numeric" min="1" value=${value.amount} onInput=${set('amount')} />
        </${Field}>
        <${Field} label="How" id=${id + '-mode'} name="credits.refill.mode" problem=${problem} hint="Top up never cuts credits bought on top.">
          <select id=${id + '-mode'} value=${value.mode} onChange=${set('mode')}>
            <option value="top_up">Top up to the amount</option>
            <option value="add">Add the amount</option>
          </select>
        </${Field}>`
      : null}
    ${value.interval === 'month'
      ? html`<${Field} label="Day of the month" id=${id + '-dom'} name="credits.refill.day_of_month" problem=${problem} hint="1 to 31; past a short month's end, its last day.">
          <input id=${id + '-dom'} type="number" inputmode="numeric" min="1" max="31" value=${value.day} onInput=${set('day')} />
        </${Field}>`
      : null}
  </div>`
}

interface RefillDraft {
  interval: '' | 'day' | 'month'
  amount: string
  mode: 'top_up' | 'add'
  day: string
}
const draftOf = (r: Refill | null): RefillDraft => ({ interval: r?.interval ?? '', amount: r ? String(r.amount) : '', mode: r?.mode ?? 'top_up', day: String(r?.day_of_month ?? 1) })

/** The refill as the API takes it; problems are field errors. */
function refillOf(d: RefillDraft, field: string) {
  if (!d.interval) return null
  const amount = Number(d.amount)
  if (!(Number.isInteger(amount) && amount >= 1 && amount <= MAX)) invalid([{ field: `${field}.amount`, message: 'A whole number of credits, at least 1.' }])
  const out: Record<string, unknown> = { amount, interval: d.interval, mode: d.mode }
  if (d.interval === 'month') {
    const day = Number(d.day)
    if (!(Number.isInteger(day) && day >= 1 && day <= 31)) invalid([{ field: `${field}.day_of_month`, message: 'A day from 1 to 31.' }])
    out.day_of_month = day
  }
  return out
}

const wholeCredits = (text: string, field: string, min = 0) => {
  const n = Number(text)
  if (text.trim() === '' || !(Number.isInteger(n) && n >= min && n <= MAX)) invalid([{ field, message: `A whole number of credits${min ? ', at least 1' : ''}.` }])
  return n
}

/** The key page's credits panel: the balance and its rule, add / subtract / set, the rule's edit, usage. */
export function KeyCredits({ k, onDone }: { k: KeyDetail; onDone: () => void }) {
  const c = k.credits
  const [op, setOp] = useState<'add' | 'subtract' | 'set'>('add')
  const [amount, setAmount] = useState('')
  const [balance, setBalance] = useState(String(c?.remaining ?? 0))
  const [refill, setRefill] = useState<RefillDraft>(draftOf((c?.refill as Refill | null) ?? null))
  const [done, setDone] = useState<string | null>(null)
  const change = useSubmit(
    () => post<Key>(apiPath`/v1/keys/${k.id}/credits`, { operation: op, amount: wholeCredits(amount, 'body.amount', op === 'set' ? 0 : 1) }),
    (key) => {
      setDone(`Balance now ${num(key.credits?.remaining ?? 0)}, on every node.`)
      setAmount('')
      onDone()
    },
  )
  const rule = useSubmit(
    () => patch<Key>(apiPath`/v1/keys/${k.id}`, { credits: { remaining: wholeCredits(balance, 'body.credits.remaining'), refill: refillOf(refill, 'body.credits.refill') } }),
    () => {
      setDone('Credits saved; the refill period starts now.')
      onDone()
    },
  )
  const unmeter = useSubmit(() => patch<Key>(apiPath`/v1/keys/${k.id}`, { credits: null }), onDone)
  return html`<section class="panel" aria-labelledby="credits-h">
    <h2 id="credits-h">Credits</h2>
    ${c
      ? html`<div class="cards">
          <div class="card"><div class="card-label">Balance</div><div class="card-value">${num(c.remaining)}</div><div class="card-sub">about 2 s behind the nodes</div></div>
          <div class="card"><div class="card-label">Refill</div><div class="card-text">${refillInWords(c.refill as Refill | null)}</div>
            <div class="card-sub">${c.refills_at ? `Next: ${when(c.refills_at)}` : 'Never refills'}</div></div>
        </div>
        <form class="form inline-form" onSubmit=${change.submit} aria-label="Change the balance" novalidate>
          <div class="form-grid pairs">
            <${Field} label="Change" id="cr-op" name="operation" problem=${change.problem}>
              <select id="cr-op" value=${op} onChange=${(e: Event) => setOp((e.target as HTMLSelectElement).value as typeof op)}>
                <option value="add">Add</option>
                <option value="subtract">Subtract (stops at 0)</option>
                <option value="set">Set the balance to</option>
              </select>
            </${Field}>
            <${Field} label="Amount (credits)" id="cr-amount" name="amount" problem=${change.problem}>
              <input id="cr-amount" type="number" inputmode="numeric" min="0" value=${amount} onInput=${(e: Event) => setAmount((e.target as HTMLInputElement).value)} />
            </${Field}>
          </div>
          <${FormProblem} problem=${change.problem} fields=${['operation', 'amount']} />
          <button class="btn primary" type="submit" disabled=${change.busy}>${op === 'add' ? 'Add credits' : op === 'subtract' ? 'Subtract credits' : 'Set balance'}</button>
        </form>
        ${done ? html`<p class="ok" role="status">${done}</p>` : null}
        <h3>Credits consumed per day</h3>
        <${CreditsChart} keyId=${k.id} />`
      : html`<p class="muted small">Unmetered: every valid answer is free. Metered, each valid validate spends its cost (1 by default) and a balance below it answers <code>credits_exhausted</code>.</p>`}
    <form class="form" onSubmit=${rule.submit} aria-label="Credits and refill" novalidate>
      <h3>${c ? 'Balance and refill rule' : 'Make this key metered'}</h3>
      <${Field} label="Balance" id="cr-balance" name="credits.remaining" problem=${rule.problem}>
        <input id="cr-balance" type="number" inputmode="numeric" min="0" value=${balance} onInput=${(e: Event) => setBalance((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${RefillFields} id="cr-refill" value=${refill} onChange=${setRefill} problem=${rule.problem} />
      <${FormProblem} problem=${rule.problem} fields=${['credits.remaining', 'credits.refill.amount', 'credits.refill.day_of_month']} />
      <div class="form-actions">
        <button class="btn" type="submit" disabled=${rule.busy}>${c ? 'Save balance and rule' : 'Make metered'}</button>
        ${c ? html`<button class="btn danger" type="button" disabled=${unmeter.busy} onClick=${() => { if (confirm('Make this key unmetered? Its balance is dropped.')) unmeter.submit() }}>Make unmetered</button>` : null}
      </div>
    </form>
  </section>`
}

/** The fields of a policy's credits that the API may name in a problem. */
export const POLICY_CREDIT_FIELDS = ['credits.initial', 'credits.refill.amount', 'credits.refill.day_of_month']

/**
 * A policy's credits as a draft (metered or not, the balance a new key starts with, the refill rule):
 * the policy page's Credits form and the New policy form share it. `onEdit` runs on every change.
 */
export function usePolicyCredits(c: Policy['credits'] | null, onEdit: () => void = () => {}) {
  const [metered, setMetered] = useState(c !== null)
  const [initial, setInitial] = useState(String(c?.initial ?? 1000))
  const [refill, setRefill] = useState<RefillDraft>(draftOf((c?.refill as Refill | null) ?? null))
  /** The API's `credits` (null: unmetered); a wrong value is a field error. */
  const value = () => (metered ? { initial: wholeCredits(initial, 'body.credits.initial'), refill: refillOf(refill, 'body.credits.refill') } : null)
  const fields = (id: string, problem: unknown) => html`
    <label class="check"><input type="checkbox" id=${id + '-metered'} checked=${metered} onChange=${(e: Event) => { onEdit(); setMetered((e.target as HTMLInputElement).checked) }} /> Metered keys</label>
    ${metered
      ? html`<${Field} label="Credits a new key starts with" id=${id + '-initial'} name="credits.initial" problem=${problem}>
          <input id=${id + '-initial'} type="number" inputmode="numeric" min="0" value=${initial} onInput=${(e: Event) => { onEdit(); setInitial((e.target as HTMLInputElement).value) }} />
        </${Field}>
        <${RefillFields} id=${id + '-refill'} value=${refill} onChange=${(v: RefillDraft) => { onEdit(); setRefill(v) }} problem=${problem} />`
      : null}`
  return { value, fields }
}

/** The policy page's credits: what each key created from it afterwards starts with. */
export function PolicyCredits({ p, onDone }: { p: Policy; onDone: () => void }) {
  const c = p.credits
  const [saved, setSaved] = useState(false)
  const credits = usePolicyCredits(c, () => setSaved(false))
  const { busy, problem, submit } = useSubmit(
    () => patch<Policy>(apiPath`/v1/policies/${p.id}`, { credits: credits.value() }),
    () => {
      setSaved(true)
      onDone()
    },
  )
  return html`<form class="panel form" onSubmit=${submit} aria-labelledby="pcredits-h" novalidate>
    <h2 id="pcredits-h">Credits</h2>
    <p class="muted small">${`${c ? `Each new key starts with ${num(c.initial)} credits. ${refillInWords(c.refill as Refill | null)}.` : 'Keys of this policy are unmetered.'} Applies to keys created afterwards: existing balances do not move.`}</p>
    ${credits.fields('pc', problem)}
    <${FormProblem} problem=${problem} fields=${POLICY_CREDIT_FIELDS} />
    ${saved && !busy ? html`<p class="ok" role="status">Saved: keys created from now on get these credits.</p>` : null}
    <div class="form-actions"><button class="btn primary" type="submit" disabled=${busy}>Save credits</button></div>
  </form>`
}
