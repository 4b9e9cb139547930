// The top bar's one search box (docs/console.md, "Finding a customer's keys"): whatever support has at
// hand (an e-mail or a part of it, a name, a key's first characters, a key, order or customer id) opens
// the keys list filtered by it (`#/keys?q=…`, GET /v1/keys?q=). The box shows the search of the page
// it is on, so the address stays the one place the search lives.
import { useEffect, useState } from 'preact/hooks'
import { html, navigate } from './ui'

/** The search of a `#/keys?q=…` address, else ''. */
export function searchOf(hash: string): string {
  const [path, query] = hash.replace(/^#\/?/, '').split('?')
  if (path !== 'keys') return ''
  return new URLSearchParams(query ?? '').get('q') ?? ''
}

/** What a search box's text becomes: trimmed, at most the 200 characters the API takes. */
export const toSearch = (typed: string) => [...typed.trim()].slice(0, 200).join('')

export function SearchBox({ hash }: { hash: string }) {
  const current = searchOf(hash)
  const [typed, setTyped] = useState(current)
  useEffect(() => setTyped(current), [current])
  const submit = (e: Event) => {
    e.preventDefault()
    const q = toSearch(typed)
    navigate(q ? `#/keys?q=${encodeURIComponent(q)}` : '#/keys')
  }
  return html`<form class="topsearch" role="search" aria-label="Find license keys" onSubmit=${submit}>
    <label class="sr-only" for="top-search">Find keys by customer e-mail, name, key or id</label>
    <input id="top-search" type="search" value=${typed} maxlength="200" autocomplete="off" spellcheck=${false}
      placeholder="Find keys: e-mail, name, key, id…" onInput=${(e: Event) => setTyped((e.target as HTMLInputElement).value)} />
    <button class="btn" type="submit">Search</button>
  </form>`
}
