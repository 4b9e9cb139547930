// The key page's customer line (docs/console.md, "Finding a customer's keys"): who holds the key, each
// part a search for that customer's other keys, and a small form that replaces it (PATCH customer) or
// removes it (customer: null).
import { useState } from 'preact/hooks'
import { apiPath, patch, type FieldError } from '../api'
import { Field, FormProblem, html, invalid, useSubmit } from '../ui'
import type { Key } from '../../../modules/keys/model'

const find = (q: string) => `#/keys?q=${encodeURIComponent(q)}`

/** The customer in a few words, each part a link to the keys it finds. */
export function CustomerText({ customer }: { customer: Key['customer'] }) {
  if (!customer) return html`<span class="muted">Not recorded</span>`
  const parts = [customer.name, customer.email, customer.external_id].filter((x): x is string => !!x)
  return html`<span class="customer-line">${parts.map((p, i) => html`<a class=${i > 0 && p === customer.external_id ? 'mono small' : ''} href=${find(p)} title="This customer’s keys">${p}</a>`)}</span>`
}

export function KeyCustomer({ k, onDone }: { k: Key; onDone: () => void }) {
  const [editing, setEditing] = useState(false)
  const [email, setEmail] = useState(k.customer?.email ?? '')
  const [name, setName] = useState(k.customer?.name ?? '')
  const [externalId, setExternalId] = useState(k.customer?.external_id ?? '')
  const open = () => {
    setEmail(k.customer?.email ?? '')
    setName(k.customer?.name ?? '')
    setExternalId(k.customer?.external_id ?? '')
    setEditing(true)
  }
  const save = (customer: Record<string, string> | null) => patch<Key>(apiPath`/v1/keys/${k.id}`, { customer })
  const done = () => {
    setEditing(false)
    onDone()
  }
  const { busy, problem, submit } = useSubmit(async () => {
    const given = Object.fromEntries(Object.entries({ email: email.trim(), name: name.trim(), external_id: externalId.trim() }).filter(([, v]) => v !== ''))
    if (Object.keys(given).length === 0) {
      invalid([{ field: 'body.customer.email', message: 'Give an e-mail, a name or an id, or remove the customer.' } satisfies FieldError])
    }
    return save(given)
  }, done)
  const remove = useSubmit(() => save(null), done)
  if (!editing) {
    return html`<span class="customer-line"><${CustomerText} customer=${k.customer} />
      <button class="btn small ghost" type="button" onClick=${open} aria-label="Edit the customer">${k.customer ? 'Edit' : 'Add'}</button></span>`
  }
  const fields = ['customer.email', 'customer.name', 'customer.external_id']
  return html`<form class="form" onSubmit=${submit} aria-label="The key's customer" novalidate>
    <div class="form-grid">
      <${Field} label="E-mail" id="cust-email" name="customer.email" problem=${problem}>
        <input id="cust-email" type="email" maxlength="254" value=${email} autocomplete="off" onInput=${(e: Event) => setEmail((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${Field} label="Name" id="cust-name" name="customer.name" problem=${problem}>
        <input id="cust-name" maxlength="200" value=${name} autocomplete="off" onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} />
      </${Field}>
      <${Field} label="Customer id" id="cust-id" name="customer.external_id" problem=${problem} hint="In your shop, CRM or payment provider.">
        <input id="cust-id" class="mono" maxlength="200" value=${externalId} autocomplete="off" onInput=${(e: Event) => setExternalId((e.target as HTMLInputElement).value)} />
      </${Field}>
    </div>
    <${FormProblem} problem=${problem ?? remove.problem} fields=${fields} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy || remove.busy}>Save customer</button>
      ${k.customer ? html`<button class="btn" type="button" disabled=${busy || remove.busy} onClick=${() => remove.submit()}>Remove customer</button>` : null}
      <button class="btn" type="button" onClick=${() => setEditing(false)}>Cancel</button>
    </div>
  </form>`
}
