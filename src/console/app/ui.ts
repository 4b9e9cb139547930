// Shared pieces of every page: the htm binding, data loading, forms whose errors sit next to their
// fields, one-time secrets with a copy button, and the "needs scope X" panel.
import { h, type ComponentChildren } from 'preact'
import { useCallback, useEffect, useState } from 'preact/hooks'
import htm from 'htm'
import { SCOPES } from '../../core/scopes'
import { ApiError, type FieldError, type Problem } from './api'

export const html = htm.bind(h)

export interface Loaded<T> {
  data: T | null
  error: Problem | null
  loading: boolean
  reload: () => void
}

/** Runs `fn` when `deps` change; keeps the previous data while reloading so the page does not flash. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: Problem | null; loading: boolean }>({ data: null, error: null, loading: true })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let live = true
    setState((s) => ({ ...s, loading: true }))
    fn().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (err) => live && setState({ data: null, error: asProblem(err), loading: false }),
    )
    return () => {
      live = false
    }
  }, [...deps, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { ...state, reload }
}

/** Field errors found in the browser, in the API's own form, so they sit where the API's would. */
export function invalid(errors: FieldError[]): never {
  throw new ApiError({ status: 400, code: 'invalid_request', detail: errors.map((e) => `${e.field}: ${e.message}`).join('; '), errors })
}

export function asProblem(err: unknown): Problem {
  if (err instanceof ApiError) return err.problem
  return { status: 0, code: 'client_error', detail: err instanceof Error ? err.message : String(err) }
}

const SCOPE_RE = new RegExp(`(${SCOPES.join('|')})`)
/** The scope a 403 insufficient_scope names in its detail (e.g. "requires scope keys:read"). */
export function missingScope(p: Problem): string | null {
  if (p.status !== 403) return null
  const m = SCOPE_RE.exec(p.detail)
  return m ? m[1] : 'another scope'
}

/** The message for one field from a problem's errors[] (field names look like `body.slug`). */
export function fieldError(p: Problem | null, name: string): string | null {
  const e = p?.errors?.find((x) => x.field === name || x.field === `body.${name}` || x.field.endsWith(`.${name}`) || x.field === `/${name}`)
  return e ? e.message : null
}

/** The problem's detail unless every error in it is already shown next to one of `fields`. */
export function FormProblem({ problem, fields = [] }: { problem: Problem | null; fields?: string[] }) {
  if (!problem) return null
  const placed = problem.errors?.length && problem.errors.every((e) => fields.some((f) => fieldError({ ...problem, errors: [e] }, f)))
  if (placed) return null
  return html`<p class="alert" role="alert">${problem.detail}</p>`
}

export function Field(props: { label: string; id: string; problem?: Problem | null; name?: string; hint?: string; class?: string; children: ComponentChildren }) {
  const err = fieldError(props.problem ?? null, props.name ?? props.id)
  return html`<div class=${'field' + (props.class ? ' ' + props.class : '') + (err ? ' invalid' : '')}>
    <label for=${props.id}>${props.label}</label>
    ${props.children}
    ${props.hint ? html`<small class="hint">${props.hint}</small>` : null}
    ${err ? html`<small class="field-error" id=${props.id + '-error'} role="alert">${err}</small>` : null}
  </div>`
}

/** Shows what a page could not load: which scope is missing, or the problem's detail. */
export function LoadError({ problem, what }: { problem: Problem; what: string }) {
  const scope = missingScope(problem)
  if (scope) {
    return html`<div class="panel notice" role="status">
      <h2>This page needs the <code>${scope}</code> scope</h2>
      <p>The API token you signed in with cannot ${what}. ${scope === 'full_access'
          ? html`Only a <code>full_access</code> token can: sign in with one.`
          : html`Sign in with a token whose scope is <code>${scope}</code> or <code>full_access</code>.`}</p>
      <p class="muted">${problem.detail}</p>
    </div>`
  }
  if (problem.status === 402) {
    return html`<div class="panel notice" role="status"><h2>Not on this plan</h2><p>${problem.detail}</p></div>`
  }
  return html`<p class="alert" role="alert">${problem.detail}</p>`
}

/** Copies `value` to the clipboard ("Copied" once done); where the page may not, `select` selects it for the user to copy. */
function useCopy(value: string, select: () => void): { copied: boolean; copy: () => Promise<void> } {
  const [copied, setCopied] = useState(false)
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value)
      setCopied(true)
    } catch {
      select()
    }
  }
  return { copied, copy }
}

export function Secret({ label, value, note }: { label: string; value: string; note?: string }) {
  const { copied, copy } = useCopy(value, () => (document.getElementById('secret-value') as HTMLInputElement | null)?.select())
  return html`<div class="secret panel" role="status">
    <label for="secret-value">${label}</label>
    <div class="secret-row">
      <input id="secret-value" class="mono" readonly value=${value} onFocus=${(e: Event) => (e.target as HTMLInputElement).select()} />
      <button type="button" class="btn" onClick=${copy}>${copied ? 'Copied' : 'Copy'}</button>
    </div>
    <small>${note ?? 'Shown once: store it now. Keyward keeps only a hash.'}</small>
  </div>`
}

/** A value to paste elsewhere (not a secret: it stays on the page), whole and wrapping, with a copy button. */
export function Copyable({ label, id, value, note }: { label: string; id: string; value: string; note?: ComponentChildren }) {
  const { copied, copy } = useCopy(value, () => {
    const el = document.getElementById(id)
    if (el) getSelection()?.selectAllChildren(el)
  })
  return html`<div class="copyable">
    <span class="label" id=${id + '-label'}>${label}</span>
    <div class="copy-row">
      <p id=${id} class="copy-value mono" aria-labelledby=${id + '-label'}>${value}</p>
      <button type="button" class="btn" onClick=${copy} aria-describedby=${id + '-label'}>${copied ? 'Copied' : 'Copy'}</button>
    </div>
    ${note ? html`<small class="hint">${note}</small>` : null}
  </div>`
}

export function Spinner() {
  return html`<p class="muted" aria-busy="true">Loading…</p>`
}

export function PageHead({ title, children }: { title: string; children?: ComponentChildren }) {
  return html`<header class="page-head"><h1>${title}</h1><div class="actions">${children}</div></header>`
}

const fmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })
export const when = (iso: string | null | undefined) => (iso ? fmt.format(new Date(iso)) : '—')
const fmtUtc = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' })
/** As `when`, in UTC and saying so: for moments every node acts on at once (a scheduled key activation). */
export const whenUtc = (iso: string | null | undefined) => (iso ? `${fmtUtc.format(new Date(iso))} UTC` : '—')
export const num = (n: number) => n.toLocaleString()

export function Badge({ status }: { status: string }) {
  return html`<span class=${'badge ' + status}>${status}</span>`
}

/** Wraps a submit handler: disables the form while it runs and stores the problem for the fields. */
export function useSubmit<T>(fn: () => Promise<T>, done?: (t: T) => void) {
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | null>(null)
  const submit = async (e?: Event) => {
    e?.preventDefault()
    setBusy(true)
    setProblem(null)
    try {
      const out = await fn()
      done?.(out)
    } catch (err) {
      setProblem(asProblem(err))
    } finally {
      setBusy(false)
    }
  }
  return { busy, problem, submit, setProblem }
}

export const navigate = (hash: string) => {
  location.hash = hash
}
