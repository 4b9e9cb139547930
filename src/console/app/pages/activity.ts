// The audit trail (GET /v1/events, full_access): every change, who made it and its data, newest
// first, filtered by type, by the object it is about and by day, paged. The filters live in the
// hash (`#/activity?resource_id=key_…`) so a key's page can link to its own history.
import { useEffect, useState } from 'preact/hooks'
import { EVENT_TYPES } from '../../../core/events'
import { apiPath, get, qs, withQuery, type Problem } from '../api'
import { Field, html, LoadError, num, PageHead, Spinner, useLoad, when } from '../ui'
import type { ApiKey, ApiKeyList } from '../../../modules/api-keys/model'
import type { AuditEvent, EventPage } from '../../../modules/events/model'
import type { Key } from '../../../modules/keys/model'
import type { Product } from '../../../modules/products/model'
import type { Policy } from '../../../modules/policies/model'
import type { SigningKey } from '../../../modules/signing/model'
import type { Actor } from '../../../modules/events/model'
import type { ActivationEventData, PlanChangedData, Webhook } from '../../../modules/webhooks/model'
import type { Relay } from '../../../modules/relays/model'

const PAGE_SIZE = 25
const TYPES = [...EVENT_TYPES].sort()
const short = (s: string, n = 12) => (s.length > n ? `${s.slice(0, n)}…` : s)

/** What an event is about, in words, with a link to it when it still exists, and its id for the filter. */
function subject(e: AuditEvent): { text: string; href?: string; id?: string } {
  const [kind, verb] = e.type.split('.')
  // Each type's data has the shape the server documents for it (webhooks/model.ts, EVENT_DATA).
  switch (kind) {
    case 'key': {
      const d = e.data as Key
      const extra =
        verb === 'revoked' && d.revoke_reason
          ? ` (${d.revoke_reason})`
          : verb === 'extended'
            ? d.expires_at ? ` until ${when(d.expires_at)}` : ', never expires'
            : verb === 'suspended' && d.suspend_reason
              ? ` (${d.suspend_reason})`
              : ''
      return { text: `Key ${d.key_prefix}…${extra}`, href: `#/keys/${d.id}`, id: d.id }
    }
    case 'activation': {
      const d = e.data as ActivationEventData
      const a = d.activation
      const device = a.device_name || short(a.device_fingerprint)
      const previous = (d as { previous_fingerprint?: string }).previous_fingerprint // activation.rebound: the fingerprint it replaced
      const why = verb === 'deactivated' && a.deactivation_reason ? ` (${a.deactivation_reason})` : verb === 'rebound' && previous ? ` (was ${short(previous)})` : ''
      return { text: `Device ${device}${why}`, href: `#/keys/${d.key_id}`, id: d.key_id }
    }
    case 'product': {
      const d = e.data as Product
      return { text: `Product ${d.name}`, href: verb !== 'deleted' ? `#/keys?product=${d.id}` : undefined, id: d.id }
    }
    case 'policy': {
      const d = e.data as Policy
      return { text: `Policy ${d.name}`, href: verb !== 'deleted' ? `#/policies/${d.id}` : undefined, id: d.id }
    }
    case 'webhook': {
      const d = e.data as Webhook
      return { text: `Webhook ${d.url}`, href: verb !== 'deleted' ? `#/webhooks/${d.id}` : undefined, id: d.id }
    }
    case 'api_key': {
      const d = e.data as ApiKey
      return { text: `API key ${d.name} (${d.scope})`, href: verb !== 'deleted' ? '#/api-keys' : undefined, id: d.id }
    }
    case 'signing_key': {
      const d = e.data as SigningKey
      return { text: `Signing key ${d.kid}`, href: '#/signing-keys' }
    }
    case 'relay': {
      const d = e.data as { relay: Relay; key_id: string }
      return { text: `Relay ${d.relay.name} (${d.relay.seats} seats)`, href: `#/keys/${d.key_id}`, id: d.key_id }
    }
    case 'account': {
      const d = e.data as PlanChangedData
      return { text: `Plan ${d.previous_plan} → ${d.plan}` }
    }
    default:
      return { text: e.type }
  }
}

function actorText(a: Actor, names: Map<string, string>): string {
  switch (a.type) {
    case 'api_key':
      return a.id && names.has(a.id) ? `API key “${names.get(a.id)}”` : `API key ${a.id ?? ''}`.trim()
    case 'operator':
      return 'The operator'
    case 'device':
      return 'A device (validate or deactivate)'
    case 'system':
      return 'Keyward (expiry, inactivity or a scheduled activation)'
    case 'connector':
      return `Payment connector ${a.id ?? ''}`.trim()
    default:
      return String((a as Actor).type)
  }
}

/** `YYYY-MM-DD` → the start of that UTC day. */
const startOfDay = (d: string) => (d ? `${d}T00:00:00Z` : '')
const fieldOf = (p: Problem | null, name: string) => !!p?.errors?.some((e) => e.field === `query.${name}`)

export function Activity({ query }: { query: URLSearchParams }) {
  const [type, setType] = useState(query.get('type') ?? '')
  const [resource, setResource] = useState(query.get('resource_id') ?? '')
  const [typed, setTyped] = useState(resource)
  const [since, setSince] = useState(query.get('since') ?? '')
  const [page, setPage] = useState(0)
  const list = useLoad(
    () => get<EventPage>(withQuery(apiPath`/v1/events`, { type, resource_id: resource, since: startOfDay(since), page, page_size: PAGE_SIZE })),
    [type, resource, since, page],
  )
  // Names for the API keys that acted: the live ones, and any named in the events shown.
  const apiKeys = useLoad(() => get<ApiKeyList>(apiPath`/v1/api-keys`).catch((): ApiKeyList => ({ data: [] })), [])
  const names = new Map<string, string>((apiKeys.data?.data ?? []).map((k) => [k.id, k.name]))
  for (const e of list.data?.data ?? []) if (e.type.startsWith('api_key.')) names.set((e.data as ApiKey).id, (e.data as ApiKey).name)
  // The filters in the address (replaced, not pushed: Back leaves the page instead of undoing a filter).
  useEffect(() => {
    history.replaceState(null, '', '#/activity' + qs({ type, resource_id: resource, since }))
  }, [type, resource, since])
  const filter = (set: () => void) => {
    set()
    setPage(0)
  }
  const only = (id: string) => filter(() => {
    setTyped(id)
    setResource(id)
  })
  const clear = () => filter(() => {
    setType('')
    setTyped('')
    setResource('')
    setSince('')
  })
  const problem = list.error
  if (problem && problem.status === 403) return html`<${PageHead} title="Activity" /><${LoadError} problem=${problem} what="read the audit trail" />`
  // A 400 names the query parameter (`query.resource_id`): it is shown under that filter.
  const placed = problem?.status === 400 && ['type', 'resource_id', 'since'].some((f) => fieldOf(problem, f))
  const d = list.data
  const filtered = !!(type || resource || since)
  return html`<${PageHead} title="Activity" />
    <p class="muted lead">Every change made in this account, who made it and what it was, newest first. Events older than the node's retention period are deleted.</p>
    <form class="filters" role="search" aria-label="Filter the activity" onSubmit=${(e: Event) => { e.preventDefault(); filter(() => setResource(typed.trim())) }}>
      <${Field} label="Type" id="ev-type" name="type" problem=${problem}>
        <select id="ev-type" value=${type} onChange=${(e: Event) => filter(() => setType((e.target as HTMLSelectElement).value))}>
          <option value="">All types</option>
          ${TYPES.map((t) => html`<option value=${t}>${t}</option>`)}
        </select>
      </${Field}>
      <${Field} label="About (id)" id="ev-resource" name="resource_id" problem=${problem} class="grow">
        <input id="ev-resource" class="mono" value=${typed} placeholder="key_…, pol_…, prod_…, wh_…" autocomplete="off" spellcheck=${false}
          onInput=${(e: Event) => setTyped((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${Field} label="Since (UTC day)" id="ev-since" name="since" problem=${problem}>
        <input id="ev-since" type="date" value=${since} onInput=${(e: Event) => filter(() => setSince((e.target as HTMLInputElement).value))} />
      </${Field}>
      <div class="filter-actions">
        <button class="btn" type="submit">Filter</button>
        ${filtered ? html`<button class="btn ghost" type="button" onClick=${clear}>Clear filters</button>` : null}
      </div>
    </form>
    ${problem && !placed ? html`<${LoadError} problem=${problem} what="read the audit trail" />` : null}
    ${!d
      ? problem ? null : html`<${Spinner} />`
      : d.data.length === 0
        ? html`<div class="panel empty"><p>${filtered ? 'No event matches these filters.' : 'No activity yet.'}</p></div>`
        : html`<ol class="feed panel" aria-label="Events, newest first">
            ${d.data.map((e) => {
              const s = subject(e)
              return html`<li class="feed-item">
                <time class="feed-when small muted" datetime=${e.created_at} title=${e.created_at}>${when(e.created_at)}</time>
                <div class="feed-what">
                  <span class="chip mono">${e.type}</span>
                  ${s.href ? html`<a href=${s.href}>${s.text}</a>` : html`<span>${s.text}</span>`}
                </div>
                <div class="feed-who small">
                  <span>by ${actorText(e.actor, names)}</span>
                  ${s.id && s.id !== resource
                    ? html`<button type="button" class="link-button" onClick=${() => only(s.id!)} aria-label=${`Only events about ${s.text}`}>Only this</button>`
                    : null}
                </div>
                <details class="feed-data">
                  <summary class="small">Data</summary>
                  <pre class="mono small">${JSON.stringify(e.data, null, 2)}</pre>
                </details>
              </li>`
            })}
          </ol>
          <nav class="pager" aria-label="Pages">
            <button class="btn small" type="button" disabled=${page === 0} onClick=${() => setPage(page - 1)}>Previous</button>
            <span>${num(d.page * d.page_size + 1)}–${num(d.page * d.page_size + d.data.length)} of ${num(d.total)}</span>
            <button class="btn small" type="button" disabled=${!d.has_more} onClick=${() => setPage(page + 1)}>Next</button>
          </nav>`}`
}
