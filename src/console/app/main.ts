/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/// <reference lib="dom.asynciterable" />
// The console's shell: sign-in, the navigation, and a hash router (`#/keys/key_...`): the token never
// travels in a URL, and the node serves one page for every route.
import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { loadSession, saveSession, setUnauthorizedHandler, type Problem, type Session } from './api'
import { html } from './ui'
import { SignIn } from './pages/signin'
import { Overview } from './pages/overview'
import { Products } from './pages/products'
import { Keys } from './pages/keys'
import { KeyPage } from './pages/key'
import { Webhooks, WebhookPage } from './pages/webhooks'
import { ApiKeys } from './pages/api-keys'
import { Activity } from './pages/activity'
import { Accounts, AccountPage } from './pages/accounts'

interface NavItem {
  hash: string
  label: string
}
// One entry per page; a page added later is one more line here.
const ACCOUNT_NAV: NavItem[] = [
  { hash: '#/overview', label: 'Overview' },
  { hash: '#/products', label: 'Products' },
  { hash: '#/keys', label: 'License keys' },
  { hash: '#/webhooks', label: 'Webhooks' },
  { hash: '#/api-keys', label: 'API keys' },
  { hash: '#/activity', label: 'Activity' },
]
const OPERATOR_NAV: NavItem[] = [{ hash: '#/accounts', label: 'Accounts' }]

function useHash() {
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const on = () => setHash(location.hash)
    addEventListener('hashchange', on)
    return () => removeEventListener('hashchange', on)
  }, [])
  return hash
}

function route(session: Session, hash: string) {
  const [path, search] = hash.replace(/^#\/?/, '').split('?')
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent)
  const query = new URLSearchParams(search ?? '')
  if (session.mode === 'operator') {
    if (parts[0] === 'accounts' && parts[1]) return html`<${AccountPage} id=${parts[1]} />`
    return html`<${Accounts} />`
  }
  switch (parts[0]) {
    case 'products':
      return html`<${Products} />`
    case 'keys':
      return parts[1] ? html`<${KeyPage} id=${parts[1]} />` : html`<${Keys} query=${query} />`
    case 'webhooks':
      return parts[1] ? html`<${WebhookPage} id=${parts[1]} />` : html`<${Webhooks} />`
    case 'api-keys':
      return html`<${ApiKeys} />`
    case 'activity':
      return html`<${Activity} query=${query} />`
    default:
      return html`<${Overview} />`
  }
}

type Theme = 'auto' | 'light' | 'dark'
function useTheme(): [Theme, () => void] {
  const [theme, setTheme] = useState<Theme>(() => (localStorage.getItem('keyward.console.theme') as Theme) || 'auto')
  useEffect(() => {
    if (theme === 'auto') delete document.documentElement.dataset.theme
    else document.documentElement.dataset.theme = theme
    localStorage.setItem('keyward.console.theme', theme)
  }, [theme])
  const next = () => setTheme((t) => (t === 'auto' ? 'dark' : t === 'dark' ? 'light' : 'auto'))
  return [theme, next]
}

function App() {
  const [session, setSession] = useState<Session | null>(loadSession())
  const [expired, setExpired] = useState<Problem | null>(null)
  const [theme, nextTheme] = useTheme()
  const [menu, setMenu] = useState(false)
  const hash = useHash()
  useEffect(() => {
    setUnauthorizedHandler((p) => {
      saveSession(null)
      setSession(null)
      setExpired(p)
    })
  }, [])
  useEffect(() => setMenu(false), [hash])
  useEffect(() => {
    const title = document.querySelector('main h1')?.textContent
    document.title = title ? `${title} · Keyward` : 'Keyward console'
  })
  const themeButton = html`<button type="button" class="btn ghost theme" onClick=${nextTheme} aria-label=${`Colour theme: ${theme}. Change`}>
    ${theme === 'auto' ? 'Auto' : theme === 'dark' ? 'Dark' : 'Light'}
  </button>`
  if (!session) {
    return html`<${SignIn}
      expired=${expired}
      themeButton=${themeButton}
      onSignIn=${(s: Session) => {
        saveSession(s)
        setExpired(null)
        setSession(s)
        location.hash = s.mode === 'operator' ? '#/accounts' : '#/overview'
      }}
    />`
  }
  const nav = session.mode === 'operator' ? OPERATOR_NAV : ACCOUNT_NAV
  const current = '#/' + (hash.replace(/^#\/?/, '').split(/[/?]/)[0] || (session.mode === 'operator' ? 'accounts' : 'overview'))
  const signOut = () => {
    saveSession(null)
    setSession(null)
    location.hash = ''
  }
  return html`<div class="shell">
    <a class="skip" href="#main" onClick=${(e: Event) => { e.preventDefault(); document.getElementById('main')?.focus() }}>Skip to content</a>
    <header class="topbar">
      <button type="button" class="btn ghost menu" aria-expanded=${menu} aria-controls="nav" onClick=${() => setMenu(!menu)}>Menu</button>
      <span class="brand"><span class="logo" aria-hidden="true">◆</span> Keyward</span>
      <span class="who">${session.mode === 'operator' ? html`<span class="badge operator">Operator</span>` : html`<span class="mono muted">${session.accountId}</span>`}</span>
      ${themeButton}
      <button type="button" class="btn ghost" onClick=${signOut}>Sign out</button>
    </header>
    <nav id="nav" class=${menu ? 'open' : ''} aria-label="Console">
      <ul>
        ${nav.map((n) => html`<li><a href=${n.hash} aria-current=${current === n.hash ? 'page' : undefined}>${n.label}</a></li>`)}
      </ul>
    </nav>
    <main id="main" tabindex="-1">${route(session, hash)}</main>
  </div>`
}

const root = document.getElementById('root')!
root.replaceChildren() // the boot shell of index.html: Preact would render beside it, not over it
render(html`<${App} />`, root)
