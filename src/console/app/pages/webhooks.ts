import { useState } from 'preact/hooks'
// The event types the server emits, from the one list it validates subscriptions against.
import { EVENT_TYPES, type EventType } from '../../../core/events'
import { apiPath, del, get, patch, post } from '../api'
import { Badge, Field, FormProblem, html, LoadError, navigate, PageHead, Secret, Spinner, useLoad, useSubmit, when } from '../ui'
import type { Webhook, WebhookDetail, WebhookList, WebhookWithSecret } from '../../../modules/webhooks/model'

/** In columns, alphabetically: each kind of object's events stay together. */
const SORTED_TYPES = [...EVENT_TYPES].sort()

/** A webhook's subscriptions in a table cell: all, or the first few. */
function eventsSummary(events: string[]) {
  if (EVENT_TYPES.every((t) => events.includes(t))) return 'All events'
  return events.length > 3 ? `${events.slice(0, 3).join(', ')} and ${events.length - 3} more` : events.join(', ')
}

function WebhookForm({ hook, onDone, onCancel }: { hook?: Webhook; onDone: (w: Webhook | WebhookWithSecret) => void; onCancel: () => void }) {
  const [url, setUrl] = useState(hook?.url ?? '')
  const [events, setEvents] = useState<EventType[]>(hook?.events ?? ['key.created', 'key.revoked'])
  const { busy, problem, submit } = useSubmit(
    () => (hook ? patch<Webhook>(apiPath`/v1/webhooks/${hook.id}`, { url, events }) : post<WebhookWithSecret>(apiPath`/v1/webhooks`, { url, events })),
    onDone,
  )
  const toggle = (t: EventType) => setEvents(events.includes(t) ? events.filter((x) => x !== t) : [...events, t])
  const eventsError = problem?.errors?.find((e) => e.field.includes('events'))
  return html`<form class="panel form" onSubmit=${submit} aria-label=${hook ? 'Edit webhook' : 'New webhook'}>
    <h2>${hook ? 'Edit webhook' : 'New webhook'}</h2>
    <${Field} label="Endpoint URL" id="wh-url" name="url" problem=${problem}>
      <input id="wh-url" type="url" required placeholder="https://example.com/keyward" value=${url} onInput=${(e: Event) => setUrl((e.target as HTMLInputElement).value)} />
    </${Field}>
    <fieldset class=${'events' + (eventsError ? ' invalid' : '')} aria-describedby=${eventsError ? 'wh-events-error' : undefined}>
      <legend>Events <span class="muted small">(${events.length} of ${EVENT_TYPES.length})</span></legend>
      <div class="events-all">
        <button class="btn small" type="button" onClick=${() => setEvents([...EVENT_TYPES])} disabled=${events.length === EVENT_TYPES.length}>Select all events</button>
        <button class="btn small" type="button" onClick=${() => setEvents([])} disabled=${events.length === 0}>Clear all events</button>
      </div>
      <div class="event-list">
        ${SORTED_TYPES.map((t) => html`<label class="check"><input type="checkbox" checked=${events.includes(t)} onChange=${() => toggle(t)} /> <span class="mono">${t}</span></label>`)}
      </div>
      ${eventsError ? html`<small class="field-error" id="wh-events-error" role="alert">${eventsError.message}</small>` : null}
    </fieldset>
    <${FormProblem} problem=${problem} fields=${['url', 'events']} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy}>${hook ? 'Save' : 'Create webhook'}</button>
      <button class="btn" type="button" onClick=${onCancel}>Cancel</button>
    </div>
  </form>`
}

export function Webhooks() {
  const list = useLoad(() => get<WebhookList>(apiPath`/v1/webhooks`), [])
  const [creating, setCreating] = useState(false)
  const [secret, setSecret] = useState<{ id: string; secret: string } | null>(null)
  if (list.error) return html`<${PageHead} title="Webhooks" /><${LoadError} problem=${list.error} what="manage webhooks" />`
  return html`<${PageHead} title="Webhooks">
      <button class="btn primary" type="button" disabled=${creating} onClick=${() => { setSecret(null); setCreating(true) }}>New webhook</button>
    </${PageHead}>
    ${creating
      ? html`<${WebhookForm} onCancel=${() => setCreating(false)} onDone=${(w: WebhookWithSecret) => { setCreating(false); setSecret({ id: w.id, secret: w.secret }); list.reload() }} />`
      : null}
    ${secret ? html`<div class="panel"><${Secret} label="Signing secret" value=${secret.secret} note="Shown once: your receiver verifies each delivery with it (Standard Webhooks)." /><a class="btn" href=${`#/webhooks/${secret.id}`}>Open the webhook</a></div>` : null}
    ${!list.data
      ? html`<${Spinner} />`
      : list.data.data.length === 0
        ? html`<div class="panel empty"><p>No webhook yet. Keyward POSTs each event you choose to your endpoint, signed, and retries for a day.</p></div>`
        : html`<div class="table-wrap"><table class="table">
            <thead><tr><th>Endpoint</th><th class="hide-s">Events</th><th>State</th></tr></thead>
            <tbody>${list.data.data.map(
              (w) => html`<tr>
                <td><a href=${`#/webhooks/${w.id}`} class="break">${w.url}</a></td>
                <td class="hide-s small">${eventsSummary(w.events)}</td>
                <td><${Badge} status=${w.is_active ? 'enabled' : 'disabled'} /></td>
              </tr>`,
            )}</tbody></table></div>`}`
}

export function WebhookPage({ id }: { id: string }) {
  const hook = useLoad(() => get<WebhookDetail>(apiPath`/v1/webhooks/${id}`), [id])
  const [editing, setEditing] = useState(false)
  const test = useSubmit(() => post(apiPath`/v1/webhooks/${id}/test`), hook.reload)
  const toggle = useSubmit(() => patch(apiPath`/v1/webhooks/${id}`, { is_active: !hook.data?.is_active }), hook.reload)
  const remove = useSubmit(() => del(apiPath`/v1/webhooks/${id}`), () => navigate('#/webhooks'))
  if (hook.error) return html`<${PageHead} title="Webhook" /><${LoadError} problem=${hook.error} what="manage webhooks" />`
  const w = hook.data
  if (!w) return html`<${PageHead} title="Webhook" /><${Spinner} />`
  const problem = test.problem ?? toggle.problem ?? remove.problem
  return html`<p class="crumbs"><a href="#/webhooks">Webhooks</a> /</p>
    <${PageHead} title="Webhook">
      <button class="btn" type="button" disabled=${test.busy} onClick=${() => test.submit()}>Send a test</button>
      <button class="btn" type="button" disabled=${toggle.busy} onClick=${() => toggle.submit()}>${w.is_active ? 'Disable' : 'Enable'}</button>
      <button class="btn" type="button" onClick=${() => setEditing(!editing)} aria-expanded=${editing}>Edit</button>
      <button class="btn danger" type="button" disabled=${remove.busy} onClick=${() => confirm('Delete this webhook?') && remove.submit()}>Delete</button>
    </${PageHead}>
    ${problem ? html`<p class="alert" role="alert">${problem.detail}</p>` : null}
    ${editing ? html`<${WebhookForm} hook=${w} onCancel=${() => setEditing(false)} onDone=${() => { setEditing(false); hook.reload() }} />` : null}
    <section class="panel">
      <dl class="props">
        <div class="wide"><dt>Endpoint</dt><dd class="break">${w.url}</dd></div>
        <div><dt>State</dt><dd><${Badge} status=${w.is_active ? 'enabled' : 'disabled'} /></dd></div>
        <div><dt>Created</dt><dd>${when(w.created_at)}</dd></div>
        <div class="wide"><dt>Events</dt><dd>${EVENT_TYPES.every((t) => w.events.includes(t))
          ? html`All ${EVENT_TYPES.length} event types`
          : [...w.events].sort().map((e) => html`<span class="chip mono">${e}</span>`)}</dd></div>
      </dl>
    </section>
    <section class="panel" aria-labelledby="del-h">
      <div class="panel-head"><h2 id="del-h">Delivery attempts</h2><button class="btn small" type="button" onClick=${hook.reload}>Refresh</button></div>
      ${w.deliveries.length === 0
        ? html`<p class="muted">No attempt yet. Send a test to see one here.</p>`
        : html`<div class="table-wrap"><table class="table deliveries">
            <thead><tr><th>When</th><th>Event</th><th class="num">Attempt</th><th>Result</th><th class="hide-s num">Time</th></tr></thead>
            <tbody>${w.deliveries.map(
              (d) => html`<tr>
                <td>${when(d.created_at)}</td>
                <td class="mono small">${d.event_type}</td>
                <td class="num">${d.attempt}</td>
                <td><${Badge} status=${d.success ? 'delivered' : 'failed'} /> ${d.status_code ?? ''}${d.error ? html`<div class="small muted break">${d.error}</div>` : null}</td>
                <td class="hide-s num">${d.duration_ms} ms</td>
              </tr>`,
            )}</tbody></table></div>`}
    </section>`
}
