import { newProduct, scopedToken, type Harness } from '../support/harness'

/**
 * The vendor's side of a test against a real node: an account (its full_access `token`), a product,
 * the app's `validate` token and the account's public key as the app would carry it.
 */
export async function vendorOn(h: Harness) {
  const token = (await h.account()).token
  const validateToken = await scopedToken(h.call, token, 'validate')
  const productId = (await newProduct(h.call, token)).id as string
  const res = await h.call('GET', '/v1/offline/public-key', { token: validateToken })
  const publicKey = { raw: res.body.public_key as string, pem: res.body.public_key_pem as string, kid: res.body.kid as string }
  return { token, validateToken, productId, publicKey }
}
