import { useState } from 'preact/hooks'
import { apiPath, del, get, post, put } from '../api'
import { Field, FormProblem, html, LoadError, num, PageHead, Spinner, useLoad, useSubmit, when } from '../ui'
import type { Product, ProductList } from '../../../modules/products/model'
import { PortalLink, PortalSwitch, type PortalFields } from './product-portal'

const slugOf = (name: string) =>
  name.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 64)

function ProductForm({ product, onDone, onCancel }: { product?: Product; onDone: () => void; onCancel: () => void }) {
  const [name, setName] = useState(product?.name ?? '')
  const [slug, setSlug] = useState(product?.slug ?? '')
  const [slugTouched, setSlugTouched] = useState(!!product)
  const [description, setDescription] = useState(product?.description ?? '')
  const [portal, setPortal] = useState((product as PortalFields | undefined)?.offline_portal === true)
  const { busy, problem, submit } = useSubmit(
    () =>
      product
        ? put(apiPath`/v1/products/${product.id}`, { name, description: description || null, ...(portal !== ((product as PortalFields).offline_portal === true) ? { offline_portal: portal } : {}) })
        : post(apiPath`/v1/products`, { name, slug, ...(description ? { description } : {}) }),
    onDone,
  )
  const slugProblem = problem?.code === 'slug_taken' ? { ...problem, errors: [{ field: 'body.slug', message: problem.detail }] } : problem
  const id = product ? `edit-${product.id}` : 'new-product'
  return html`<form class="panel form" onSubmit=${submit} aria-label=${product ? `Edit ${product.name}` : 'New product'}>
    <h2>${product ? `Edit ${product.name}` : 'New product'}</h2>
    <div class="form-grid">
      <${Field} label="Name" id=${id + '-name'} name="name" problem=${problem}>
        <input id=${id + '-name'} required maxlength="200" value=${name}
          onInput=${(e: Event) => {
            const v = (e.target as HTMLInputElement).value
            setName(v)
            if (!slugTouched) setSlug(slugOf(v))
          }} />
      </${Field}>
      <${Field} label="Slug" id=${id + '-slug'} name="slug" problem=${slugProblem} hint=${product ? 'A slug cannot change.' : 'Lower-case letters, digits and dashes.'}>
        <input id=${id + '-slug'} class="mono" required disabled=${!!product} value=${slug}
          onInput=${(e: Event) => {
            setSlugTouched(true)
            setSlug((e.target as HTMLInputElement).value)
          }} />
      </${Field}>
      <${Field} label="Description (optional)" id=${id + '-desc'} name="description" problem=${problem}>
        <input id=${id + '-desc'} value=${description} onInput=${(e: Event) => setDescription((e.target as HTMLInputElement).value)} />
      </${Field}>
    </div>
    ${product ? html`<${PortalSwitch} id=${id} on=${portal} onToggle=${setPortal} />` : null}
    <${FormProblem} problem=${slugProblem} fields=${['name', 'slug', 'description', 'offline_portal']} />
    <div class="form-actions">
      <button class="btn primary" type="submit" disabled=${busy}>${product ? 'Save' : 'Create product'}</button>
      <button class="btn" type="button" onClick=${onCancel}>Cancel</button>
    </div>
  </form>`
}

function DeleteButton({ product, onDone }: { product: Product; onDone: () => void }) {
  const { busy, problem, submit } = useSubmit(() => del(apiPath`/v1/products/${product.id}`), onDone)
  const confirmThen = () => {
    if (confirm(`Delete ${product.name}? Its revoked and expired keys go with it.`)) submit()
  }
  const words =
    problem?.code === 'product_has_active_keys'
      ? `${product.name} still has active license keys. Revoke them (or wait until they expire) before deleting the product; nothing was deleted.`
      : problem?.detail
  return html`<button class="btn danger small" type="button" disabled=${busy} onClick=${confirmThen} aria-label=${`Delete ${product.name}`}>Delete</button>
    ${problem ? html`<p class="alert inline" role="alert">${words}</p>` : null}`
}

export function Products() {
  const list = useLoad(() => get<ProductList>(apiPath`/v1/products`), [])
  const [creating, setCreating] = useState(false)
  const [editing, setEditing] = useState<string | null>(null)
  if (list.error) return html`<${PageHead} title="Products" /><${LoadError} problem=${list.error} what="list products" />`
  return html`<${PageHead} title="Products">
      <button class="btn primary" type="button" onClick=${() => setCreating(true)} disabled=${creating}>New product</button>
    </${PageHead}>
    ${creating ? html`<${ProductForm} onCancel=${() => setCreating(false)} onDone=${() => { setCreating(false); list.reload() }} />` : null}
    ${!list.data
      ? html`<${Spinner} />`
      : list.data.data.length === 0
        ? html`<div class="panel empty"><p>No product yet. A product groups the license keys of one application.</p></div>`
        : html`<div class="table-wrap"><table class="table">
            <thead><tr><th>Name</th><th>Slug</th><th class="num">Active keys</th><th class="num">Activations</th><th class="hide-s">Created</th><th><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>
              ${list.data.data.map((p) =>
                editing === p.id
                  ? html`<tr><td colspan="6"><${ProductForm} product=${p} onCancel=${() => setEditing(null)} onDone=${() => { setEditing(null); list.reload() }} /></td></tr>`
                  : html`<tr>
                      <td><a href=${`#/keys?product=${p.id}`}>${p.name}</a>${p.description ? html`<div class="muted small">${p.description}</div>` : null}<${PortalLink} product=${p} /></td>
                      <td class="mono">${p.slug}</td>
                      <td class="num">${num(p.active_keys)}</td>
                      <td class="num">${num(p.total_activations)}</td>
                      <td class="hide-s">${when(p.created_at)}</td>
                      <td class="row-actions">
                        <button class="btn small" type="button" onClick=${() => setEditing(p.id)} aria-label=${`Edit ${p.name}`}>Edit</button>
                        <${DeleteButton} product=${p} onDone=${list.reload} />
                      </td>
                    </tr>`,
              )}
            </tbody>
          </table></div>`}`
}
