import { useState } from 'preact/hooks'
import { apiPath, del, get, patch, post } from '../api'
import { Badge, Field, FormProblem, html, LoadError, navigate, PageHead, Spinner, useLoad, useSubmit, when } from '../ui'
import type { Connector, ConnectorDetail, ConnectorList as ConnectorListSchema, Mapping, Provider } from '../../../modules/connectors/model'
import type { PolicyList as PolicyListSchema } from '../../../modules/policies/model'

type ConnectorList = (typeof ConnectorListSchema)['static']
type PolicyList = (typeof PolicyListSchema)['static']

/** What the vendor does in each provider's dashboard (docs/payments.md says the same, with the why). */
const GUIDE: Record<Provider, { label: string; where: string; secret: string; price: string; events: string[]; note?: string }> = {
  stripe: {
    label: 'Stripe',
    where: 'Dashboard → Developers → Webhooks → Add endpoint',
    secret: "the endpoint's signing secret (whsec_…)",
    price: 'price_…',
    events: [
      'checkout.session.completed',
      'checkout.session.async_payment_succeeded',
      'invoice.paid',
      'invoice.payment_failed',
      'invoice_payment.paid',
      'customer.subscription.updated',
      'customer.subscription.deleted',
      'customer.subscription.paused',
      'customer.subscription.resumed',
      'charge.refunded',
      'charge.dispute.created',
      'charge.dispute.closed',
    ],
    note: 'One-time Checkout Sessions: set metadata.keyward_price to the price id when you create the session.',
  },
  paddle: {
    label: 'Paddle',
    where: 'Developer tools → Notifications → New destination (webhook)',
    secret: "the destination's secret key (pdl_ntfset_…)",
    price: 'pri_…',
    events: [
      'transaction.completed',
      'transaction.payment_failed',
      'subscription.updated',
      'subscription.paused',
      'subscription.resumed',
      'subscription.canceled',
      'subscription.past_due',
      'adjustment.created',
      'adjustment.updated',
    ],
    note: "To email keys, pass customData: {email} in Paddle.js checkout (Paddle's webhook carries no email).",
  },
  lemonsqueezy: {
    label: 'Lemon Squeezy',
    where: 'Settings → Webhooks → +',
    secret: 'the signing secret you type there',
    price: 'variant id, e.g. 123456',
    events: [
      'order_created',
      'order_refunded',
      'subscription_created',
      'subscription_updated',
      'subscription_cancelled',
      'subscription_resumed',
      'subscription_expired',
      'subscription_paused',
      'subscription_unpaused',
      'subscription_payment_failed',
      'subscription_payment_refunded',
    ],
  },
}

const endpointUrl = (c: Connector) => `${location.origin}${c.endpoint_path}`

function Guide({ provider, connector }: { provider: Provider; connector?: Connector }) {
  const g = GUIDE[provider]
  return html`<div class="guide">
    <ol>
      <li>In ${g.label}: <strong>${g.where}</strong>.</li>
      <li>Endpoint URL: ${connector
        ? html`<code class="break" data-testid="endpoint-url">${endpointUrl(connector)}</code>`
        : html`<span class="muted">shown here once the connector is created</span>`}</li>
      <li>Enable these events:<div class="chips">${g.events.map((e) => html`<span class="chip mono">${e}</span>`)}</div></li>
      <li>Copy ${g.secret} into the signing secret field.</li>
    </ol>
    ${g.note ? html`<p class="small muted">${g.note}</p>` : null}
  </div>`
}

function MappingRows({ mappings, setMappings, policies, provider }: { mappings: Mapping[]; setMappings: (m: Mapping[]) => void; policies: PolicyList['data']; provider: Provider }) {
  const set = (i: number, m: Partial<Mapping>) => setMappings(mappings.map((x, j) => (j === i ? { ...x, ...m } : x)))
  return html`<fieldset class="mappings">
    <legend>Prices → policies</legend>
    ${mappings.map(
      (m, i) => html`<div class="mapping-row">
        <input aria-label=${`Price ${i + 1}`} placeholder=${GUIDE[provider].price} value=${m.price} required onInput=${(e: Event) => set(i, { price: (e.target as HTMLInputElement).value })} />
        <select aria-label=${`Policy for price ${i + 1}`} value=${m.policy_id} required onChange=${(e: Event) => set(i, { policy_id: (e.target as HTMLSelectElement).value })}>
          <option value="">Choose a policy</option>
          ${policies.map((p) => html`<option value=${p.id}>${p.name}</option>`)}
        </select>
        <button class="btn small" type="button" onClick=${() => setMappings(mappings.filter((_, j) => j !== i))}>Remove</button>
      </div>`,
    )}
    <button class="btn small" type="button" onClick=${() => setMappings([...mappings, { price: '', policy_id: '' }])}>Add a price</button>
    ${policies.length === 0 ? html`<p class="small muted">No policy yet: <a href="#/policies">create one</a> for each thing you sell.</p>` : null}
  </fieldset>`
}

function ConnectorForm({ connector, mailOn, onDone, onCancel }: { connector?: Connector; mailOn: boolean; onDone: (c: Connector) => void; onCancel: () => void }) {
  const [provider, setProvider] = useState<Provider>(connector?.provider ?? 'stripe')
  const [name, setName] = useState(connector?.name ?? '')
  const [secret, setSecret] = useState('')
  const [mappings, setMappings] = useState<Mapping[]>(connector?.mappings ?? [{ price: '', policy_id: '' }])
  const [emailKeys, setEmailKeys] = useState(connector?.email_keys ?? true)
  const policies = useLoad(() => get<PolicyList>(apiPath`/v1/policies`), [])
  const { busy, problem, submit } = useSubmit(() => {
    const body = { name, mappings, email_keys: emailKeys, ...(secret ? { signing_secret: secret } : {}) }
    return connector ? patch<Connector>(apiPath`/v1/connectors/${connector.id}`, body) : post<Connector>(apiPath`/v1/connectors`, { ...body, provider })
  }, onDone)
  return html`<form class="panel form" onSubmit=${submit} aria-label=${connector ? 'Edit connector' : 'New connector'}>
    <h2>${connector ? 'Edit connector' : 'New connector'}</h2>
    ${connector
      ? null
      : html`<fieldset class="providers"><legend>Payment provider</legend>
          ${(Object.keys(GUIDE) as Provider[]).map(
            (p) => html`<label class="check"><input type="radio" name="provider" checked=${provider === p} onChange=${() => setProvider(p)} /> ${GUIDE[p].label}</label>`,
          )}</fieldset>`}
    <${Guide} provider=${provider} connector=${connector} />
    <${Field} label="Name" id="con-name" name="name" problem=${problem}>
      <input id="con-name" required maxlength="200" placeholder=${`${GUIDE[provider].label} live`} value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} />
    </${Field}>
    <${Field} label="Signing secret" id="con-secret" name="signing_secret" problem=${problem} hint=${connector ? 'Leave empty to keep the current one. Never shown again.' : 'Stored encrypted; never shown again.'}>
      <input id="con-secret" type="password" autocomplete="off" required=${!connector} value=${secret} onInput=${(e: Event) => setSecret((e.target as HTMLInputElement).value)} />
    </${Field}>
    ${policies.data ? html`<${MappingRows} mappings=${mappings} setMappings=${setMappings} policies=${policies.data.data} provider=${provider} />` : html`<${Spinner} />`}
    <label class="check"><input type="checkbox" checked=${emailKeys} onChange=${() => setEmailKeys(!emailKeys)} /> Email each new key to the buyer</label>
    ${emailKeys && !mailOn ? html`<p class="small muted">Mail is off on this server (no SMTP_URL): keys are issued but not emailed.</p>` : null}
    <${FormProblem} problem=${problem} fields=${['name', 'signing_secret', 'provider']} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy}>${connector ? 'Save' : 'Create connector'}</button>
      <button class="btn" type="button" onClick=${onCancel}>Cancel</button>
    </div>
  </form>`
}

export function Connectors() {
  const list = useLoad(() => get<ConnectorList>(apiPath`/v1/connectors`), [])
  const [creating, setCreating] = useState(false)
  if (list.error) return html`<${PageHead} title="Payments" /><${LoadError} problem=${list.error} what="manage payment connectors" />`
  return html`<${PageHead} title="Payments">
      <button class="btn primary" type="button" disabled=${creating} onClick=${() => setCreating(true)}>New connector</button>
    </${PageHead}>
    ${list.data && !list.data.mail_enabled ? html`<div class="panel notice" role="status">Mail is off on this server (no SMTP_URL): connectors issue keys but do not email them.</div>` : null}
    ${creating ? html`<${ConnectorForm} mailOn=${!!list.data?.mail_enabled} onCancel=${() => setCreating(false)} onDone=${(c: Connector) => navigate(`#/payments/${c.id}`)} />` : null}
    ${!list.data
      ? html`<${Spinner} />`
      : list.data.data.length === 0
        ? html`<div class="panel empty"><p>No connector yet. A connector turns Stripe, Paddle or Lemon Squeezy webhooks into keys: issued on purchase, extended on renewal, ended on cancellation or refund.</p></div>`
        : html`<div class="table-wrap"><table class="table">
            <thead><tr><th>Name</th><th>Provider</th><th class="hide-s num">Prices</th><th class="hide-s">Email</th></tr></thead>
            <tbody>${list.data.data.map(
              (c) => html`<tr>
                <td><a href=${`#/payments/${c.id}`}>${c.name}</a></td>
                <td>${GUIDE[c.provider].label}</td>
                <td class="hide-s num">${c.mappings.length}</td>
                <td class="hide-s">${c.email_keys ? 'on' : 'off'}</td>
              </tr>`,
            )}</tbody></table></div>`}`
}

export function ConnectorPage({ id }: { id: string }) {
  const con = useLoad(() => get<ConnectorDetail>(apiPath`/v1/connectors/${id}`), [id])
  const policies = useLoad(() => get<PolicyList>(apiPath`/v1/policies`), [])
  const policyName = (pid: string) => policies.data?.data.find((p) => p.id === pid)?.name ?? pid
  const [editing, setEditing] = useState(false)
  const remove = useSubmit(() => del(apiPath`/v1/connectors/${id}`), () => navigate('#/payments'))
  if (con.error) return html`<${PageHead} title="Connector" /><${LoadError} problem=${con.error} what="manage payment connectors" />`
  const c = con.data
  if (!c) return html`<${PageHead} title="Connector" /><${Spinner} />`
  return html`<p class="crumbs"><a href="#/payments">Payments</a> /</p>
    <${PageHead} title=${c.name}>
      <button class="btn" type="button" onClick=${() => setEditing(!editing)} aria-expanded=${editing}>Edit</button>
      <button class="btn danger" type="button" disabled=${remove.busy} onClick=${() => confirm('Delete this connector? The keys it issued stay.') && remove.submit()}>Delete</button>
    </${PageHead}>
    ${remove.problem ? html`<p class="alert" role="alert">${remove.problem.detail}</p>` : null}
    ${editing ? html`<${ConnectorForm} connector=${c} mailOn=${c.mail_enabled} onCancel=${() => setEditing(false)} onDone=${() => { setEditing(false); con.reload() }} />` : null}
    <section class="panel">
      <dl class="props">
        <div><dt>Provider</dt><dd>${GUIDE[c.provider].label}</dd></div>
        <div><dt>Email keys</dt><dd>${c.email_keys ? (c.mail_enabled ? 'on' : 'on, but mail is off on this server') : 'off'}</dd></div>
        <div><dt>Created</dt><dd>${when(c.created_at)}</dd></div>
        <div class="wide"><dt>Prices</dt><dd>${c.mappings.length === 0
          ? html`<span class="muted">None mapped: every purchase is refused as unmapped.</span>`
          : c.mappings.map((m) => html`<span class="chip"><span class="mono">${m.price}</span> → <a href=${`#/policies/${m.policy_id}`}>${policyName(m.policy_id)}</a></span>`)}</dd></div>
      </dl>
      <h3>Set-up in ${GUIDE[c.provider].label}</h3>
      <${Guide} provider=${c.provider} connector=${c} />
    </section>
    <section class="panel" aria-labelledby="rx-h">
      <div class="panel-head"><h2 id="rx-h">Received events</h2><button class="btn small" type="button" onClick=${con.reload}>Refresh</button></div>
      ${c.events.length === 0
        ? html`<p class="muted">Nothing received yet. Send a test event from ${GUIDE[c.provider].label} to see it here.</p>`
        : html`<div class="table-wrap"><table class="table">
            <thead><tr><th>When</th><th>Event</th><th>Outcome</th><th class="hide-s">What happened</th></tr></thead>
            <tbody>${c.events.map(
              (e) => html`<tr>
                <td>${when(e.received_at)}</td>
                <td class="mono small break">${e.type ?? '—'}</td>
                <td><${Badge} status=${e.outcome} /></td>
                <td class="hide-s small break">${e.detail}${e.key_ids.length > 0
                  ? html`<div>${e.key_ids.map((k) => html`<a class="chip mono" href=${`#/keys/${k}`}>${k}</a>`)}</div>`
                  : null}</td>
              </tr>`,
            )}</tbody></table></div>`}
    </section>
    <section class="panel" aria-labelledby="mail-h">
      <div class="panel-head"><h2 id="mail-h">Key emails</h2></div>
      ${!c.mail_enabled ? html`<p class="muted">Mail is off on this server (no SMTP_URL).</p>` : null}
      ${c.emails.length === 0
        ? html`<p class="muted">No email sent yet.</p>`
        : html`<div class="table-wrap"><table class="table">
            <thead><tr><th>Queued</th><th>To</th><th>Status</th><th class="num">Attempts</th><th class="hide-s">Last error / next try</th></tr></thead>
            <tbody>${c.emails.map(
              (m) => html`<tr>
                <td>${when(m.created_at)}</td>
                <td class="break">${m.to}</td>
                <td><${Badge} status=${m.status} /></td>
                <td class="num">${m.attempts}</td>
                <td class="hide-s small break">${m.last_error ?? ''}${m.next_attempt_at ? html`<div class="muted">next: ${when(m.next_attempt_at)}</div>` : null}</td>
              </tr>`,
            )}</tbody></table></div>`}
    </section>`
}
