import { useState } from 'preact/hooks'
import { identify, type Problem, type Session } from '../api'
import { Field, html, useSubmit } from '../ui'

export function SignIn({ onSignIn, expired, themeButton }: { onSignIn: (s: Session) => void; expired: Problem | null; themeButton: unknown }) {
  const [token, setToken] = useState('')
  const { busy, problem, submit } = useSubmit(() => identify(token.trim()), onSignIn)
  return html`<main class="signin" id="main">
    <div class="signin-card panel">
      <div class="signin-head"><span class="brand"><span class="logo" aria-hidden="true">◆</span> Keyward</span>${themeButton}</div>
      <h1>Sign in to the console</h1>
      <p class="muted">Paste an API token of your account (<code>kw_…</code>), or the operator token of this node.
        It stays in this browser tab only and is forgotten when you sign out or close the tab.</p>
      ${expired ? html`<p class="alert" role="alert">You were signed out: ${expired.detail}</p>` : null}
      <form onSubmit=${submit}>
        <${Field} label="Token" id="token" problem=${problem ? { ...problem, errors: [{ field: 'token', message: problem.detail }] } : null}>
          <input id="token" name="token" type="password" autocomplete="off" spellcheck=${false} required
            value=${token} onInput=${(e: Event) => setToken((e.target as HTMLInputElement).value)}
            aria-describedby=${problem ? 'token-error' : undefined} />
        </${Field}>
        <button class="btn primary" type="submit" disabled=${busy || !token.trim()}>${busy ? 'Checking…' : 'Sign in'}</button>
      </form>
    </div>
  </main>`
}
