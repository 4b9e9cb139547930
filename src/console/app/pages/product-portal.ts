// The product's end-user page for air-gapped activation (docs/integrating.md, "Customers without a
// network"): its switch (`offline_portal` on the product, PUT /v1/products/:id) and its link,
// /portal/:product_id/offline on this node, for the vendor to give to customers without a network.
import { html } from '../ui'

/** What the product object says about its page: a narrow type of its own (absent on older nodes). */
export interface PortalFields {
  id: string
  offline_portal?: boolean
}

/** The page's address on this node (the one the console was loaded from). */
export const portalUrl = (productId: string) => `${location.origin}/portal/${encodeURIComponent(productId)}/offline`

/** The switch in the product's edit form, with what turning it on does. */
export function PortalSwitch({ id, on, onToggle }: { id: string; on: boolean; onToggle: (on: boolean) => void }) {
  return html`<div class="portal-switch">
    <label class="check"><input type="checkbox" id=${id + '-portal'} checked=${on} onChange=${(e: Event) => onToggle((e.target as HTMLInputElement).checked)} /> End-user page for activation without internet</label>
    <p class="hint small">Customers whose computers never reach the internet paste or scan their app's request code there and take back the response code; the license key inside the request is their credential. Off: the page and its two routes answer 404.</p>
  </div>`
}

/** Under the product's name in the list: the link to its page when the page is on. */
export function PortalLink({ product }: { product: PortalFields }) {
  if (product.offline_portal !== true) return null
  const url = portalUrl(product.id)
  return html`<div class="small"><a href=${url} target="_blank" rel="noopener" title=${url}>Offline activation page</a></div>`
}
