// The console's pages in one table: the navigation is drawn from it and the hash router reads it, so a
// page added later is one entry here. An id taken from the address (`#/keys/<id>`) is checked against
// the id shape of its kind before the page gets it: the address is input, and the page puts the id into
// an API path. An object's page is keyed by its id: opening another key starts from empty forms, not
// from what was typed on the previous one.
import { isId, type IdPrefix } from '../../core/ids'
import type { Mode } from './api'
import { html, PageHead } from './ui'
import { Overview } from './pages/overview'
import { Products } from './pages/products'
import { Keys } from './pages/keys'
import { Policies, PolicyPage } from './pages/policies'
import { KeyPage } from './pages/key'
import { ImportKeys } from './pages/import'
import { Webhooks, WebhookPage } from './pages/webhooks'
import { Connectors, ConnectorPage } from './pages/connectors'
import { ApiKeys } from './pages/api-keys'
import { SigningKeys } from './pages/signing-keys'
import { Activity } from './pages/activity'
import { Accounts, AccountPage } from './pages/accounts'

type View = ReturnType<typeof html>

export interface Section {
  /** The first segment of its hash: `#/keys`. */
  path: string
  /** Its entry in the navigation. */
  label: string
  mode: Mode
  list: (query: URLSearchParams) => View
  /** One object's page, `#/keys/<id>`, for well-formed ids of this kind only. */
  item?: { prefix: IdPrefix; noun: string; page: (id: string, query: URLSearchParams) => View }
}

// In navigation order; each mode's first section is its home page (and the page of an unknown hash).
export const SECTIONS: Section[] = [
  { path: 'overview', label: 'Overview', mode: 'account', list: () => html`<${Overview} />` },
  { path: 'products', label: 'Products', mode: 'account', list: () => html`<${Products} />` },
  {
    path: 'policies',
    label: 'Policies',
    mode: 'account',
    list: (query) => html`<${Policies} query=${query} />`,
    item: { prefix: 'pol', noun: 'a policy', page: (id) => html`<${PolicyPage} key=${id} id=${id} />` },
  },
  {
    path: 'keys',
    label: 'License keys',
    mode: 'account',
    list: (query) => html`<${Keys} query=${query} />`,
    item: { prefix: 'key', noun: 'a license key', page: (id, query) => html`<${KeyPage} key=${id} id=${id} query=${query} />` },
  },
  { path: 'import', label: 'Import keys', mode: 'account', list: () => html`<${ImportKeys} />` },
  {
    path: 'webhooks',
    label: 'Webhooks',
    mode: 'account',
    list: () => html`<${Webhooks} />`,
    item: { prefix: 'wh', noun: 'a webhook', page: (id) => html`<${WebhookPage} id=${id} />` },
  },
  {
    path: 'payments',
    label: 'Payments',
    mode: 'account',
    list: () => html`<${Connectors} />`,
    item: { prefix: 'con', noun: 'a payment connector', page: (id) => html`<${ConnectorPage} key=${id} id=${id} />` },
  },
  { path: 'api-keys', label: 'API keys', mode: 'account', list: () => html`<${ApiKeys} />` },
  { path: 'signing-keys', label: 'Signing keys', mode: 'account', list: () => html`<${SigningKeys} />` },
  { path: 'activity', label: 'Activity', mode: 'account', list: (query) => html`<${Activity} query=${query} />` },
  {
    path: 'accounts',
    label: 'Accounts',
    mode: 'operator',
    list: () => html`<${Accounts} />`,
    item: { prefix: 'acct', noun: 'an account', page: (id) => html`<${AccountPage} id=${id} />` },
  },
]

export const sectionsOf = (mode: Mode) => SECTIONS.filter((s) => s.mode === mode)

/** A hash segment as typed; one that is not valid percent-encoding stays as it is (and is no id). */
function decode(segment: string) {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

/** The section a hash belongs to and what to show for it. */
export function resolve(mode: Mode, hash: string): { section: Section; view: View } {
  const [path, search] = hash.replace(/^#\/?/, '').split('?')
  const [first, ...rest] = (path ?? '').split('/').filter(Boolean)
  const sections = sectionsOf(mode)
  const section = sections.find((s) => s.path === first) ?? sections[0]!
  const query = new URLSearchParams(search ?? '')
  if (!section.item || rest.length === 0 || section.path !== first) return { section, view: section.list(query) }
  const id = rest.map(decode).join('/')
  if (!isId(section.item.prefix, id)) return { section, view: NotAnId(section, id) }
  return { section, view: section.item.page(id, query) }
}

function NotAnId(section: Section, text: string) {
  const shown = text.length > 80 ? `${text.slice(0, 80)}…` : text
  return html`<p class="crumbs"><a href=${'#/' + section.path}>${section.label}</a> /</p>
    <${PageHead} title="Not found" />
    <p class="alert break" role="alert">“<span class="mono">${shown}</span>” is not ${section.item!.noun} id, so there is nothing to show at this address.</p>
    <div class="panel">
      <p>Ids of this kind look like <span class="mono">${section.item!.prefix}_01JD7Z3X9K8Q4W2E6R5T1Y0V3J</span>. Check the link you followed, or find it in the list.</p>
      <p><a class="btn" href=${'#/' + section.path}>All ${section.label.toLowerCase()}</a></p>
    </div>`
}
