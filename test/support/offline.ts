// What an application author would write: read a license text with nothing but Node's crypto,
// independent of the service's own code, so the tests prove the format is verifiable as documented.
import { createPublicKey, verify } from 'node:crypto'
import { newProduct, type Client, type Harness } from './harness'

export interface Envelope {
  enc: string
  sig: string
  alg: string
  kid: string
  /** The signer's KWCERT1 when it is not the root (licenses v2). */
  certificate?: string
}

export function envelopeOf(license: string): Envelope {
  const body = license.replace(/-----(BEGIN|END) KEYWARD LICENSE-----/g, '').replace(/\s+/g, '')
  return JSON.parse(Buffer.from(body, 'base64').toString('utf8'))
}

/** The few lines from the README: true when `license` was signed by the key in `publicKeyPem`. */
export function verifiesWith(publicKeyPem: string, license: string): boolean {
  const { enc, sig } = envelopeOf(license)
  return verify(null, Buffer.from(`license/${enc}`), createPublicKey(publicKeyPem), Buffer.from(sig, 'base64'))
}

export function payloadOf(license: string): any {
  return JSON.parse(Buffer.from(envelopeOf(license).enc, 'base64').toString('utf8'))
}

/** Re-wraps an envelope as license text (for tampering tests). */
export function licenseText(envelope: Envelope): string {
  const body = Buffer.from(JSON.stringify(envelope)).toString('base64')
  return `-----BEGIN KEYWARD LICENSE-----\n${body.match(/.{1,64}/g)!.join('\n')}\n-----END KEYWARD LICENSE-----\n`
}

/** Where the offline tests start: an account with one product, and the account's public key (PEM). */
export async function offlineAccount(h: Harness) {
  const acct = await h.account()
  const productId: string = (await newProduct(h.call, acct.token)).id
  const publicKeyPem: string = (await h.call('GET', '/v1/offline/public-key', { token: acct.token })).body.public_key_pem
  return { acct, productId, publicKeyPem }
}

/** POST /v1/keys/:id/offline-licenses. */
export function issueLicense(call: Client, token: string, keyId: string, body: unknown, headers?: Record<string, string>) {
  return call('POST', `/v1/keys/${keyId}/offline-licenses`, { token, body, headers })
}
