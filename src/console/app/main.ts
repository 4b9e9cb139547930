/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/// <reference lib="dom.asynciterable" />
// The console's shell: sign-in, the navigation, and a hash router (`#/keys/key_...`, its table in
// routes.ts): the token never travels in a URL, and the node serves one page for every route.
import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { loadSession, saveSession, setUnauthorizedHandler, type Problem, type Session } from './api'
import { html } from './ui'
import { SignIn } from './pages/signin'
import { SearchBox } from './search-box'
import { resolve, sectionsOf } from './routes'

function useHash() {
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const on = () => setHash(location.hash)
    addEventListener('hashchange', on)
    return () => removeEventListener('hashchange', on)
  }, [])
  return hash
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
        location.hash = '#/' + sectionsOf(s.mode)[0]!.path
      }}
    />`
  }
  const { section, view } = resolve(session.mode, hash)
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
      ${session.mode === 'account' ? html`<${SearchBox} hash=${hash} />` : null}
      <span class="who">${session.mode === 'operator' ? html`<span class="badge operator">Operator</span>` : session.accountName
        ? html`<span class="account-name" title=${`Account ${session.accountId}`}>${session.accountName}</span>`
        : html`<span class="mono muted">${session.accountId}</span>`}</span>
      ${themeButton}
      <button type="button" class="btn ghost" onClick=${signOut}>Sign out</button>
    </header>
    <nav id="nav" class=${menu ? 'open' : ''} aria-label="Console">
      <ul>
        ${sectionsOf(session.mode).map((s) => html`<li><a href=${'#/' + s.path} aria-current=${s === section ? 'page' : undefined}>${s.label}</a></li>`)}
      </ul>
    </nav>
    <main id="main" tabindex="-1">${view}</main>
  </div>`
}

const root = document.getElementById('root')!
root.replaceChildren() // the boot shell of index.html: Preact would render beside it, not over it
render(html`<${App} />`, root)
