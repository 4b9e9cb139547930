// The relay's page (`/`): its license, its leases with a release button, and its request code for a
// renewal, behind the admin token that `relay serve` printed on its first start. The token is kept in
// sessionStorage (gone with the tab), sent as a Bearer token to /relay/api/*; nothing else is fetched.
import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { Badge, Copyable, html, when } from '../../../console/app/ui'

const SESSION = 'keyward.relay.token'

interface Lease { device_fingerprint: string; device_name: string | null; since: string; until: string }
interface State {
  license: null | { relay_id: string; key_id: string; key_prefix: string | null; product_id: string; plan: string | null; seats: number; lease_seconds: number; expires_at: string; key_expires_at: string | null; issued_at: string }
  status: string
  last_check_in_at: string | null
  upstream_url: string | null
  leases: Lease[]
  request_code: string
}

class Refused extends Error {
  constructor(readonly status: number, detail: string) {
    super(detail)
  }
}

async function call<T>(token: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const json = await res.json().catch(() => null)
  if (!res.ok) throw new Refused(res.status, json?.errors?.[0]?.message ?? json?.detail ?? `HTTP ${res.status}`)
  return json as T
}

function SignIn({ onToken }: { onToken: (t: string) => void }) {
  const [error, setError] = useState<string | null>(null)
  const submit = async (e: Event) => {
    e.preventDefault()
    const token = String(new FormData(e.target as HTMLFormElement).get('token') ?? '').trim()
    try {
      await call(token, '/relay/api/state')
      sessionStorage.setItem(SESSION, token)
      onToken(token)
    } catch (err) {
      setError(err instanceof Refused && err.status === 401 ? 'That is not this relay\'s admin token.' : (err as Error).message)
    }
  }
  return html`<main class="signin"><form class="panel signin-card" onSubmit=${submit}>
    <div class="signin-head"><span class="brand"><span class="logo" aria-hidden="true">◆</span> Keyward Relay</span></div>
    <h1>Sign in</h1>
    <p class="muted small">The admin token was printed by <code>relay serve</code> on its first start.</p>
    <div class=${'field' + (error ? ' invalid' : '')}>
      <label for="token">Admin token</label>
      <input id="token" name="token" type="password" autocomplete="current-password" required aria-describedby=${error ? 'token-error' : undefined} />
      ${error ? html`<small id="token-error" class="field-error">${error}</small>` : null}
    </div>
    <button class="btn primary" type="submit">Sign in</button>
  </form></main>`
}

function Dashboard({ token, onSignOut }: { token: string; onSignOut: () => void }) {
  const [state, setState] = useState<State | null>(null)
  const [problem, showProblem] = useState<string | null>(null)
  const [notice, showNotice] = useState<string | null>(null)
  // one message at a time: a new one replaces the other kind
  const setProblem = (p: string | null) => (showProblem(p), p !== null && showNotice(null))
  const setNotice = (n: string | null) => (showNotice(n), n !== null && showProblem(null))
  const load = () =>
    call<State>(token, '/relay/api/state').then(
      (s) => setState(s),
      (err) => (err instanceof Refused && err.status === 401 ? onSignOut() : setProblem((err as Error).message)),
    )
  useEffect(() => {
    void load()
    const timer = setInterval(load, 5000)
    return () => clearInterval(timer)
  }, [token])
  const release = async (lease: Lease) => {
    if (!confirm(`Release the seat of ${lease.device_name ?? lease.device_fingerprint.slice(0, 12)}? Its app is refused until a seat is free again.`)) return
    const released = await call(token, '/relay/api/release', { device_fingerprint: lease.device_fingerprint }).then(() => true, (e) => (setProblem((e as Error).message), false))
    await load()
    if (released) setNotice('Seat released.')
  }
  const install = async (e: Event) => {
    e.preventDefault()
    const form = new FormData(e.target as HTMLFormElement)
    const key = String(form.get('key') ?? '').trim()
    try {
      setState(await call<State>(token, '/relay/api/license', { license: String(form.get('license') ?? ''), ...(key ? { key } : {}) }))
      setNotice('License installed.')
      ;(e.target as HTMLFormElement).reset()
    } catch (err) {
      setProblem((err as Error).message)
    }
  }
  const checkIn = async () => {
    const done = await call<{ ok: boolean; error?: string }>(token, '/relay/api/check-in', {}).catch((e) => ({ ok: false, error: (e as Error).message }))
    await load()
    if (done.ok) setNotice('Checked in.')
    else setProblem(`The check-in did not go through: ${done.error ?? 'unknown'}. The relay keeps serving on its license.`)
  }
  if (!state) return html`<main><p class="muted" aria-busy="true">${problem ?? 'Loading…'}</p></main>`
  const l = state.license
  const status = l === null ? 'no license' : state.status
  return html`<main id="main">
    <header class="page-head"><h1>Relay</h1><div class="actions">
      ${state.upstream_url ? html`<button class="btn" type="button" onClick=${checkIn}>Check in now</button>` : null}
    </div></header>
    ${problem ? html`<div class="panel notice" role="alert">${problem}</div>` : null}
    ${notice ? html`<p class="muted" role="status">${notice}</p>` : null}
    <section class="cards" aria-label="Summary">
      <div class="card"><div class="card-label">Status</div><div class="card-text"><${Badge} status=${status} /></div><div class="card-sub">${state.status === 'valid' ? 'answering valid' : 'answering the key\'s reason'}</div></div>
      <div class="card"><div class="card-label">Seats leased</div><div class="card-value">${state.leases.length}${l ? html`<span class="muted small"> / ${l.seats}</span>` : null}</div><div class="card-sub">${l ? `leases of ${l.lease_seconds} s` : '—'}</div></div>
      <div class="card"><div class="card-label">License expires</div><div class="card-text">${when(l?.expires_at)}</div><div class="card-sub">renewed at each check-in</div></div>
      <div class="card"><div class="card-label">Last check-in</div><div class="card-text">${state.last_check_in_at ? when(state.last_check_in_at) : 'never'}</div><div class="card-sub break">${state.upstream_url ?? 'no upstream: offline'}</div></div>
    </section>
    <section class="panel" aria-labelledby="license-h"><h2 id="license-h">License</h2>
      ${l === null
        ? html`<p class="empty">No license installed yet: send the request code below to your vendor and install what they send back.</p>`
        : html`<dl class="kv">
            <dt>Key</dt><dd><code>${l.key_prefix ? `${l.key_prefix}…` : '—'}</code> <span class="muted small">${l.key_id}</span></dd>
            <dt>Seats</dt><dd>${l.seats}</dd>
            <dt>Key expires</dt><dd>${l.key_expires_at ? when(l.key_expires_at) : 'never'}</dd>
            <dt>License</dt><dd>issued ${when(l.issued_at)}, expires ${when(l.expires_at)}</dd>
            <dt>Relay</dt><dd><code>${l.relay_id}</code></dd>
            <dt>Product</dt><dd><code>${l.product_id}</code>${l.plan ? ` · ${l.plan}` : ''}</dd>
          </dl>`}
    </section>
    <section class="panel" aria-labelledby="leases-h"><div class="panel-head"><h2 id="leases-h">Leases</h2><span class="muted small">${state.leases.length} held</span></div>
      ${state.leases.length === 0
        ? html`<p class="empty">No seat is leased.</p>`
        : html`<div class="table-wrap"><table class="table stack">
            <thead><tr><th scope="col">Device</th><th scope="col">Since</th><th scope="col">Until</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>${state.leases.map((lease) => html`<tr key=${lease.device_fingerprint}>
              <td data-label="Device">${lease.device_name ?? html`<span class="muted">unnamed</span>`}<br /><code class="muted small">${lease.device_fingerprint.slice(0, 16)}…</code></td>
              <td data-label="Since">${when(lease.since)}</td>
              <td data-label="Until">${when(lease.until)}</td>
              <td class="row-actions"><button class="btn small danger" type="button" onClick=${() => release(lease)} aria-label=${`Release ${lease.device_name ?? lease.device_fingerprint}`}>Release</button></td>
            </tr>`)}</tbody></table></div>`}
    </section>
    <section class="panel" aria-labelledby="renew-h"><h2 id="renew-h">A new license</h2>
      <${Copyable} label="Request code" id="request-code" value=${state.request_code} note="Send it to your vendor (or POST /v1/keys/:id/relays); install the license they send back here or with relay load." />
      <form onSubmit=${install}>
        <div class="field"><label for="license">Relay license</label><textarea id="license" name="license" rows="4" required class="mono"></textarea></div>
        <div class="field"><label for="key">Key value</label><input id="key" name="key" autocomplete="off" placeholder=${l ? 'kept from the first load' : 'XXXXX-XXXXX-XXXXX-XXXXX-XXXXX'} /></div>
        <button class="btn primary" type="submit">Install license</button>
      </form>
    </section>
  </main>`
}

function App() {
  const [token, setToken] = useState<string | null>(sessionStorage.getItem(SESSION))
  const signOut = () => (sessionStorage.removeItem(SESSION), setToken(null))
  if (token === null) return html`<${SignIn} onToken=${setToken} />`
  return html`<div class="relay">
    <header class="relay-top"><span class="brand"><span class="logo" aria-hidden="true">◆</span> Keyward Relay</span><span class="who"><button class="btn ghost small" type="button" onClick=${signOut}>Sign out</button></span></header>
    <${Dashboard} token=${token} onSignOut=${signOut} />
  </div>`
}

const root = document.getElementById('root')!
root.textContent = '' // the boot placeholder painted from the HTML alone
render(html`<${App} />`, root)
