import { useState } from 'preact/hooks'
import { isId } from '../../../core/ids'
import { PLANS } from '../../../core/plans'
import { apiPath, get, patch, post, withQuery } from '../api'
import { Field, FormProblem, html, LoadError, navigate, num, PageHead, Secret, Spinner, useLoad, useSubmit, when } from '../ui'
import type { Account, AccountPage as AccountList, AccountWithUsage } from '../../../modules/accounts/model'
import type { ApiKeyWithToken } from '../../../modules/api-keys/model'
import { CreateApiKey } from './api-keys'

/** POST /admin/accounts: the account and its first full_access token. */
type CreatedAccount = { account: Account; api_key: ApiKeyWithToken }

function CreateAccount({ onCancel }: { onCancel: () => void }) {
  const [name, setName] = useState('')
  const [plan, setPlan] = useState('free')
  const [created, setCreated] = useState<CreatedAccount | null>(null)
  const { busy, problem, submit } = useSubmit(() => post<CreatedAccount>(apiPath`/admin/accounts`, { name, plan }), setCreated)
  if (created) {
    return html`<div class="panel">
      <h2>Account ${created.account.name} created</h2>
      <${Secret} label="Its first full_access API token" value=${created.api_key.token} note="Shown once: hand it to the account's owner." />
      <div class="form-actions"><a class="btn primary" href=${`#/accounts/${created.account.id}`}>Open the account</a><button class="btn" type="button" onClick=${onCancel}>Done</button></div>
    </div>`
  }
  return html`<form class="panel form" onSubmit=${submit} aria-label="New account">
    <h2>New account</h2>
    <div class="form-grid">
      <${Field} label="Name" id="acct-name" name="name" problem=${problem}>
        <input id="acct-name" required maxlength="200" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${Field} label="Plan" id="acct-plan" name="plan" problem=${problem}>
        <select id="acct-plan" value=${plan} onChange=${(e: Event) => setPlan((e.target as HTMLSelectElement).value)}>${PLANS.map((p) => html`<option value=${p}>${p}</option>`)}</select>
      </${Field}>
    </div>
    <${FormProblem} problem=${problem} fields=${['name', 'plan']} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy}>Create account</button>
      <button class="btn" type="button" onClick=${onCancel}>Cancel</button>
    </div>
  </form>`
}

export function Accounts() {
  const [q, setQ] = useState('')
  const [query, setQuery] = useState('')
  const [page, setPage] = useState(0)
  const [creating, setCreating] = useState(false)
  const list = useLoad(() => get<AccountList>(withQuery(apiPath`/admin/accounts`, { q: query, page, page_size: 20 })), [query, page])
  const search = (e: Event) => {
    e.preventDefault()
    // A whole account id opens that account directly; anything else searches names and id prefixes.
    if (isId('acct', q.trim())) navigate(`#/accounts/${q.trim()}`)
    else {
      setPage(0)
      setQuery(q.trim())
    }
  }
  const d = list.data
  return html`<${PageHead} title="Accounts">
      <button class="btn primary" type="button" disabled=${creating} onClick=${() => setCreating(true)}>New account</button>
    </${PageHead}>
    ${creating ? html`<${CreateAccount} onCancel=${() => { setCreating(false); list.reload() }} />` : null}
    <form class="filters" role="search" onSubmit=${search}>
      <div class="field inline-field grow">
        <label for="acct-q">Name or account id</label>
        <input id="acct-q" type="search" value=${q} placeholder="Acme or acct_…" onInput=${(e: Event) => setQ((e.target as HTMLInputElement).value)} />
      </div>
      <button class="btn" type="submit">Search</button>
    </form>
    ${list.error
      ? list.error.status === 404
        ? html`<div class="panel"><p>This node cannot list accounts yet. Enter an account id above to open it.</p></div>`
        : html`<${LoadError} problem=${list.error} what="list accounts" />`
      : !d
        ? html`<${Spinner} />`
        : d.data.length === 0
          ? html`<div class="panel empty"><p>No account matches.</p></div>`
          : html`<div class="table-wrap"><table class="table">
              <thead><tr><th>Name</th><th>Plan</th><th class="num hide-s">Keys</th><th class="hide-s">Created</th></tr></thead>
              <tbody>${d.data.map(
                (a) => html`<tr>
                  <td><a href=${`#/accounts/${a.id}`}>${a.name}</a><div class="mono small muted">${a.id}</div></td>
                  <td><span class="chip">${a.plan}</span></td>
                  <td class="num hide-s">${num(a.usage.keys)}</td>
                  <td class="hide-s">${when(a.created_at)}</td>
                </tr>`,
              )}</tbody></table></div>
              <nav class="pager" aria-label="Pages">
                <button class="btn small" type="button" disabled=${page === 0} onClick=${() => setPage(page - 1)}>Previous</button>
                <span>${num(d.total)} ${d.total === 1 ? 'account' : 'accounts'}</span>
                <button class="btn small" type="button" disabled=${!d.has_more} onClick=${() => setPage(page + 1)}>Next</button>
              </nav>`}`
}

export function AccountPage({ id }: { id: string }) {
  const acct = useLoad(() => get<AccountWithUsage>(apiPath`/admin/accounts/${id}`), [id])
  const [plan, setPlan] = useState<string | null>(null)
  const [issuing, setIssuing] = useState(false)
  const [token, setToken] = useState<string | null>(null)
  const [changed, setChanged] = useState<string | null>(null)
  const change = useSubmit(() => patch<Account>(apiPath`/admin/accounts/${id}`, { plan }), (a) => { setPlan(null); setChanged(a.plan); acct.reload() })
  if (acct.error) return html`<${PageHead} title="Account" /><${LoadError} problem=${acct.error} what="read accounts" />`
  const a = acct.data
  if (!a) return html`<${PageHead} title="Account" /><${Spinner} />`
  return html`<p class="crumbs"><a href="#/accounts">Accounts</a> /</p>
    <${PageHead} title=${a.name}>
      <button class="btn" type="button" disabled=${issuing} onClick=${() => { setToken(null); setIssuing(true) }}>Issue an API key</button>
    </${PageHead}>
    ${issuing ? html`<${CreateApiKey} path=${apiPath`/admin/accounts/${id}/api-keys`} onCancel=${() => setIssuing(false)} onDone=${(t: string) => { setIssuing(false); setToken(t); acct.reload() }} />` : null}
    ${token ? html`<${Secret} label="API token for this account" value=${token} />` : null}
    <section class="panel">
      <dl class="props">
        <div><dt>Id</dt><dd class="mono">${a.id}</dd></div>
        <div><dt>Created</dt><dd>${when(a.created_at)}</dd></div>
        <div><dt>Products</dt><dd>${num(a.usage.products)}</dd></div>
        <div><dt>Keys</dt><dd>${num(a.usage.keys)} (${num(a.usage.active_keys)} active)</dd></div>
        <div><dt>Activations</dt><dd>${num(a.usage.activations)}</dd></div>
        <div><dt>API keys</dt><dd>${num(a.usage.api_keys)}</dd></div>
      </dl>
    </section>
    <form class="panel form" onSubmit=${change.submit} aria-label="Account plan">
      <h2>Plan</h2>
      <${Field} label="Plan" id="plan" name="plan" problem=${change.problem} hint="A downgrade deletes nothing; it only blocks creating more.">
        <select id="plan" value=${plan ?? a.plan} onChange=${(e: Event) => { setChanged(null); setPlan((e.target as HTMLSelectElement).value) }}>${PLANS.map((p) => html`<option value=${p}>${p}</option>`)}</select>
      </${Field}>
      <${FormProblem} problem=${change.problem} fields=${['plan']} />
      ${changed && !plan ? html`<p class="ok" role="status">The plan is now ${changed}.</p>` : null}
      <button class="btn primary" type="submit" disabled=${change.busy || !plan || plan === a.plan}>Change plan</button>
    </form>`
}
