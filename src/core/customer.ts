// Who holds a key (docs/api.md, "Customers and search"): an e-mail address, a name and the customer's
// id in the vendor's or the payment provider's system, each optional but at least one. One check for
// the API's create and PATCH, the import and the payment connectors; the key's row stores the three
// fields, all null for "no customer".
import { AppError, type FieldError } from './errors'

export interface Customer {
  email?: string
  name?: string
  external_id?: string
}

/**
 * One address as the HTML standard defines a valid e-mail address (local@domain, domain labels of
 * letters, digits and hyphens): no list, no display name, no quotes, no spaces, no CR/LF. ASCII only,
 * so lower-casing it is the same everywhere (JavaScript and Postgres alike).
 */
export const EMAIL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/
export const EMAIL_MAX = 254
export const TEXT_MAX = 200

const CONTROL = /[\u0000-\u001F\u007F-\u009F]/
const FIELDS = ['email', 'name', 'external_id'] as const

const chars = (s: string) => [...s].length

/** Every problem of a `customer` value (null clears it): field errors named `<field>.email` etc. */
export function customerProblems(field: string, value: unknown): FieldError[] {
  if (value === null) return []
  if (typeof value !== 'object' || Array.isArray(value)) return [{ field, message: 'must be null or an object {email?, name?, external_id?}' }]
  const v = value as Record<string, unknown>
  const problems: FieldError[] = []
  for (const k of Object.keys(v)) {
    if (!(FIELDS as readonly string[]).includes(k)) problems.push({ field: `${field}.${k}`, message: 'is not a customer field (email, name, external_id)' })
  }
  if (v.email !== undefined && v.email !== null) {
    if (typeof v.email !== 'string' || v.email.length > EMAIL_MAX || !EMAIL.test(v.email)) {
      problems.push({ field: `${field}.email`, message: `must be one valid e-mail address of at most ${EMAIL_MAX} characters` })
    }
  }
  for (const k of ['name', 'external_id'] as const) {
    const s = v[k]
    if (s === undefined || s === null) continue
    if (typeof s !== 'string' || chars(s) < 1 || chars(s) > TEXT_MAX || CONTROL.test(s) || s.trim() === '') {
      problems.push({ field: `${field}.${k}`, message: `must be text of 1..${TEXT_MAX} characters, not blank, no control characters` })
    }
  }
  if (problems.length === 0 && FIELDS.every((k) => v[k] === undefined || v[k] === null)) {
    problems.push({ field, message: 'must name at least one of email, name and external_id (null for no customer)' })
  }
  return problems
}

/** A checked `customer` (null = none), the e-mail lower-cased; a bad value is a 400 naming its field. */
export function checkCustomer(field: string, value: unknown): Customer | null {
  const problems = customerProblems(field, value)
  if (problems.length > 0) throw new AppError('invalid_request', `${problems[0]!.field} ${problems[0]!.message}`, { errors: problems })
  if (value === null) return null
  const v = value as Record<string, string | null | undefined>
  const out: Customer = {}
  if (v.email != null) out.email = v.email.toLowerCase()
  if (v.name != null) out.name = v.name
  if (v.external_id != null) out.external_id = v.external_id
  return out
}

/** The three columns a key stores (null each when absent). */
export interface CustomerColumns {
  customer_email: string | null
  customer_name: string | null
  customer_external_id: string | null
}

export const customerColumns = (c: Customer | null): CustomerColumns => ({
  customer_email: c?.email ?? null,
  customer_name: c?.name ?? null,
  customer_external_id: c?.external_id ?? null,
})

/** The key object's `customer`: every field present, null when not given. */
export interface CustomerView {
  email: string | null
  name: string | null
  external_id: string | null
}

/** The key object's `customer` from its columns: null when all three are null. */
export function customerOf(r: CustomerColumns): CustomerView | null {
  if (r.customer_email === null && r.customer_name === null && r.customer_external_id === null) return null
  return { email: r.customer_email, name: r.customer_name, external_id: r.customer_external_id }
}
