import { useState } from 'preact/hooks'
import { SCOPES } from '../../../core/scopes'
import { apiPath, del, get, post, type ApiPath } from '../api'
import { Field, FormProblem, html, LoadError, PageHead, Secret, Spinner, useLoad, useSubmit, when } from '../ui'
import type { ApiKey, ApiKeyList, ApiKeyWithToken } from '../../../modules/api-keys/model'

export function CreateApiKey({ path, onDone, onCancel }: { path: ApiPath; onDone: (token: string) => void; onCancel: () => void }) {
  const [name, setName] = useState('')
  const [scope, setScope] = useState('validate')
  const { busy, problem, submit } = useSubmit(() => post<ApiKeyWithToken>(path, { name, scope }), (k) => onDone(k.token))
  return html`<form class="panel form" onSubmit=${submit} aria-label="New API key">
    <h2>New API key</h2>
    <div class="form-grid">
      <${Field} label="Name" id="ak-name" name="name" problem=${problem}>
        <input id="ak-name" required maxlength="200" placeholder="e.g. desktop app" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${Field} label="Scope" id="ak-scope" name="scope" problem=${problem} hint="Ship only validate keys inside your application.">
        <select id="ak-scope" value=${scope} onChange=${(e: Event) => setScope((e.target as HTMLSelectElement).value)}>
          ${SCOPES.map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
      </${Field}>
    </div>
    <${FormProblem} problem=${problem} fields=${['name', 'scope']} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy}>Create API key</button>
      <button class="btn" type="button" onClick=${onCancel}>Cancel</button>
    </div>
  </form>`
}

export function ApiKeys() {
  const list = useLoad(() => get<ApiKeyList>(apiPath`/v1/api-keys`), [])
  const [creating, setCreating] = useState(false)
  const [token, setToken] = useState<{ label: string; value: string } | null>(null)
  const [problem, setProblem] = useState<string | null>(null)
  const act = async (fn: () => Promise<unknown>) => {
    setProblem(null)
    try {
      await fn()
      list.reload()
    } catch (err) {
      setProblem((err as { problem?: { detail: string } }).problem?.detail ?? String(err))
    }
  }
  const rotate = (k: ApiKey) =>
    confirm(`Rotate ${k.name}? Its current token stops working at once.`) &&
    act(async () => setToken({ label: `New token for ${k.name}`, value: (await post<ApiKeyWithToken>(apiPath`/v1/api-keys/${k.id}/rotate`)).token }))
  const remove = (k: ApiKey) => confirm(`Delete ${k.name}? Its token stops working at once.`) && act(() => del(apiPath`/v1/api-keys/${k.id}`))
  if (list.error) return html`<${PageHead} title="API keys" /><${LoadError} problem=${list.error} what="manage API keys" />`
  return html`<${PageHead} title="API keys">
      <button class="btn primary" type="button" disabled=${creating} onClick=${() => { setToken(null); setCreating(true) }}>New API key</button>
    </${PageHead}>
    ${creating
      ? html`<${CreateApiKey} path=${apiPath`/v1/api-keys`} onCancel=${() => setCreating(false)} onDone=${(t: string) => { setCreating(false); setToken({ label: 'API token', value: t }); list.reload() }} />`
      : null}
    ${token ? html`<${Secret} label=${token.label} value=${token.value} />` : null}
    ${problem ? html`<p class="alert" role="alert">${problem}</p>` : null}
    ${!list.data
      ? html`<${Spinner} />`
      : html`<div class="table-wrap"><table class="table">
          <thead><tr><th>Name</th><th>Scope</th><th class="hide-s">Token</th><th class="hide-s">Last used</th><th><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${list.data.data.map(
            (k) => html`<tr>
              <td>${k.name}</td>
              <td><span class="chip mono">${k.scope}</span></td>
              <td class="hide-s mono small">${k.token_prefix}…</td>
              <td class="hide-s">${when(k.last_used_at)}</td>
              <td class="row-actions">
                <button class="btn small" type="button" onClick=${() => rotate(k)} aria-label=${`Rotate ${k.name}`}>Rotate</button>
                <button class="btn small danger" type="button" onClick=${() => remove(k)} aria-label=${`Delete ${k.name}`}>Delete</button>
              </td>
            </tr>`,
          )}</tbody></table></div>`}`
}
